package labsteps

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Summary is the one-line verdict of a result, for reports.
func (r Result) Summary() string {
	verdict := r.Verdict()
	return fmt.Sprintf("%s  %d %-9s %6.2fs  %s", verdict, r.Step.Num, r.Step.Slug, r.Took.Seconds(), r.Step.Title)
}

// Detail explains a failure: the failed check (expected, observed, why) and
// where the logs are. It is "" for a pass.
func (r Result) Detail() string {
	if r.Pass {
		return ""
	}
	var b strings.Builder
	if c := r.Failed(); c != nil {
		fmt.Fprintf(&b, "✗ %s\n  expected: %s\n  observed: %s\n  why:      %s\n", c.What, c.Expected, c.Observed, c.Why)
	}
	if r.Problem != "" {
		fmt.Fprintf(&b, "✗ %s\n", r.Problem)
	}
	if r.LogDir != "" {
		fmt.Fprintf(&b, "  logs:     %s (the story: %s/lab.log)\n", r.LogDir, r.Dir)
	}
	return b.String()
}

// Output is what a grader shows for one step: the verdict, what was checked,
// why it matters, and on failure the detail.
func (r Result) Output() string {
	var b strings.Builder
	b.WriteString(r.Summary() + "\n")
	b.WriteString("Checks: " + r.Step.Checks + "\n")
	b.WriteString("Why: " + r.Step.Why + "\n")
	if d := r.Detail(); d != "" {
		b.WriteString(d)
	} else {
		fmt.Fprintf(&b, "%d checks passed.\n", len(r.Checks))
	}
	return b.String()
}

// WriteGradescope writes Gradescope's results.json: one test per step, one
// point each.
func WriteGradescope(w io.Writer, results []Result, took time.Duration) error {
	type test struct {
		Name       string  `json:"name"`
		Number     string  `json:"number"`
		Score      float64 `json:"score"`
		MaxScore   float64 `json:"max_score"`
		Status     string  `json:"status"`
		Output     string  `json:"output"`
		Visibility string  `json:"visibility"`
	}
	out := struct {
		Score         float64 `json:"score"`
		ExecutionTime float64 `json:"execution_time"`
		Output        string  `json:"output"`
		Visibility    string  `json:"visibility"`
		Tests         []test  `json:"tests"`
	}{ExecutionTime: took.Seconds(), Visibility: "visible", Tests: []test{}}
	passed := 0
	for _, r := range results {
		t := test{Name: fmt.Sprintf("Step %d: %s", r.Step.Num, r.Step.Title), Number: strconv.Itoa(r.Step.Num),
			MaxScore: 1, Status: "failed", Output: r.Output(), Visibility: "visible"}
		if r.Pass {
			t.Score, t.Status = 1, "passed"
			passed++
		}
		out.Score += t.Score
		out.Tests = append(out.Tests, t)
	}
	out.Output = fmt.Sprintf("%d of %d lab steps passed.", passed, len(results))
	if n := countTimedOut(results); n > 0 {
		out.Output += fmt.Sprintf(" %d timed out (TIMEOUT: a wait ran out, not a wrong answer; re-run on a quieter machine).", n)
	}
	if len(results) > 0 && results[0].Limits.Wait > 0 {
		out.Output += "\nLimits: " + results[0].Limits.String() + "."
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteJUnit writes JUnit XML: one testcase per step.
func WriteJUnit(w io.Writer, results []Result, took time.Duration) error {
	s := JUnitSuite{Name: "snacklab-lab", Time: JUnitSeconds(took.Seconds())}
	for _, r := range results {
		tc := JUnitCase{Name: JUnitCaseName(r.Step.Num, r.Step.Slug), Classname: "snacklab.lab",
			Time: JUnitSeconds(r.Took.Seconds()), SystemOut: r.Narrative}
		if !r.Pass {
			msg := r.Problem
			if c := r.Failed(); c != nil {
				msg = c.What
			}
			typ := "LabStepFailed"
			if r.TimedOut {
				typ, msg = "LabStepTimedOut", "timed out: "+msg
			}
			tc.Failure = &JUnitFailure{Message: msg, Type: typ, Text: r.Detail()}
		}
		s.Cases = append(s.Cases, tc)
	}
	return EncodeJUnit(w, s)
}

// ---- JUnit XML, shared with internal/grade and internal/isolate ----

// JUnit XML is read by CI systems; the strictest common reader is Jenkins'
// xUnit plugin, which validates every file against its junit-10.xsd and
// skips a file that fails. So the shape below follows that schema: each
// <testsuite> carries name, tests, failures and errors; a <testcase> holds
// only failure, skipped and system-out (no properties), and times are plain
// decimal seconds. internal/junittest checks the output with xmllint.

// JUnitSuite is one <testsuite>. EncodeJUnit fills its tests, failures,
// errors and skipped counts from its cases.
type JUnitSuite struct {
	XMLName   xml.Name        `xml:"testsuite"`
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"` // always 0: a step either passes or fails
	Skipped   int             `xml:"skipped,attr"`
	Time      JUnitSeconds    `xml:"time,attr"`
	Props     JUnitProperties `xml:"properties,omitempty"`
	Cases     []JUnitCase     `xml:"testcase"`
	SystemOut string          `xml:"system-out,omitempty"`
}

// JUnitCase is one <testcase>: a failure when Failure is set, skipped when
// Skipped is. The schema forbids <properties> inside a testcase, so
// EncodeJUnit moves Props up to the suite's properties, each named
// "CASE.NAME" (step8_crash.points): a per-step figure stays in the file
// where every reader accepts it.
type JUnitCase struct {
	Name      string          `xml:"name,attr"`
	Classname string          `xml:"classname,attr"`
	Time      JUnitSeconds    `xml:"time,attr"`
	Props     JUnitProperties `xml:"-"`
	Failure   *JUnitFailure   `xml:"failure,omitempty"`
	Skipped   *JUnitFailure   `xml:"skipped,omitempty"`
	SystemOut string          `xml:"system-out,omitempty"`
}

// JUnitFailure is a <failure> (or <skipped>): a one-line message, its type
// and the full text.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnitProperties is a <properties> element, left out when empty (an
// a>b field path would write an empty parent).
type JUnitProperties []JUnitProperty

// MarshalXML writes <properties> holding one <property> each.
func (ps JUnitProperties) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return e.EncodeElement(struct {
		P []JUnitProperty `xml:"property"`
	}{ps}, start)
}

// JUnitProperty is one <property name value>.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitSeconds is a time attribute: seconds with three decimals ("0.210").
type JUnitSeconds float64

// MarshalXMLAttr writes s with three decimals.
func (s JUnitSeconds) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	return xml.Attr{Name: name, Value: strconv.FormatFloat(float64(s), 'f', 3, 64)}, nil
}

// JUnitCaseName names a step's testcase: "step8_crash".
func JUnitCaseName(num int, slug string) string {
	return fmt.Sprintf("step%d_%s", num, strings.ReplaceAll(slug, "-", "_"))
}

// EncodeJUnit writes an XML header and the suites inside <testsuites>,
// indented, with each suite's counts taken from its cases and each case's
// properties moved up to its suite (see JUnitCase).
func EncodeJUnit(w io.Writer, suites ...JUnitSuite) error {
	suites = slices.Clone(suites)
	for i := range suites {
		s := &suites[i]
		s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), 0, 0, 0
		s.Props = slices.Clone(s.Props)
		for _, c := range s.Cases {
			if c.Failure != nil {
				s.Failures++
			}
			if c.Skipped != nil {
				s.Skipped++
			}
			for _, p := range c.Props {
				s.Props = append(s.Props, JUnitProperty{Name: c.Name + "." + p.Name, Value: p.Value})
			}
		}
	}
	root := struct {
		XMLName xml.Name     `xml:"testsuites"`
		Suites  []JUnitSuite `xml:"testsuite"`
	}{Suites: suites}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteFile writes path with fn, creating its directory: into path.tmp,
// then renamed, so a reader never sees half a report.
func WriteFile(path string, fn func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := fn(&b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// ---- HTML ----

// Timeline is one section of a step's events, drawn as an SVG swimlane chart.
type Timeline struct {
	ID      string
	Title   string
	SVG     template.HTML
	NEvents int
}

// Timelines splits a result's events by section and draws each.
func (r Result) Timelines() []Timeline {
	var order []string
	by := map[string][]Event{}
	for _, e := range r.Events {
		if _, ok := by[e.Section]; !ok {
			order = append(order, e.Section)
		}
		by[e.Section] = append(by[e.Section], e)
	}
	var out []Timeline
	for i, sec := range order {
		title := sec
		if title == "" {
			title = "setup"
		}
		id := fmt.Sprintf("timeline-step%d-%d", r.Step.Num, i)
		out = append(out, Timeline{ID: id, Title: title, SVG: timelineSVG(id, by[sec]), NEvents: len(by[sec])})
	}
	return out
}

var laneColor = map[string]string{
	"A": "#1f77b4", "B": "#2ca02c", "S": "#e377c2", LaneReceiver: "#9467bd", LaneQueuectl: "#8c564b", LaneHarness: "#7f7f7f",
}

// clockBreakMs is a jump of the injected clock between two events that the
// timeline marks with a break instead of one more evenly spaced row.
const clockBreakMs = 1000

// epochMs matches wall-clock instants in ms (2001 to 2286) in event texts.
var epochMs = regexp.MustCompile(`\b1\d{12}\b`)

// timelineSVG draws events top to bottom: one column per lane with its
// lifeline, one row per event with a mark in its lane, the real time, the
// injected clock and what happened. Refusals, kills and crash exits are red.
// So that the story reads at a glance:
//   - a kill is an arrow from the harness to the process it killed;
//   - a jump of the injected clock (A's 30 s lease running out without
//     anybody waiting), or the real time the harness waited for ("wait …"
//     actions, on the real clock), is a marked break, not one more evenly
//     spaced row;
//   - wall-clock instants in texts are shown relative to the step's start
//     when the section carries an epoch event, on the real-time column's scale;
//   - a summary event closes the chart with one line.
func timelineSVG(id string, events []Event) template.HTML {
	// Senders first (A, B, then any other), then the receiver, queuectl, the harness.
	rank := func(l string) int {
		switch l {
		case "A":
			return 0
		case "B":
			return 1
		case LaneReceiver:
			return 3
		case LaneQueuectl:
			return 4
		case LaneHarness:
			return 5
		}
		return 2
	}
	var (
		drawn    []Event
		summary  []Event
		epoch    int64 = -1
		clocked  bool
		lanes    []string
		seenLane = map[string]bool{}
		procLane = map[string]string{} // a process's lane, from its start event
	)
	for _, e := range events {
		switch e.Kind {
		case kindEpoch:
			epoch, _ = strconv.ParseInt(e.Text, 10, 64)
			continue
		case kindSummary:
			summary = append(summary, e)
			continue
		}
		drawn = append(drawn, e)
		if name, ok := strings.CutPrefix(e.Text, "start "); ok && e.Kind == "start" {
			procLane[name] = e.Lane
		}
		clocked = clocked || e.Clock >= 0
		if !seenLane[e.Lane] {
			seenLane[e.Lane] = true
			lanes = append(lanes, e.Lane)
		}
	}
	sort.SliceStable(lanes, func(i, j int) bool { return rank(lanes[i]) < rank(lanes[j]) })
	relative := func(text string) string {
		if epoch < 0 {
			return text
		}
		return epochMs.ReplaceAllStringFunc(text, func(m string) string {
			v, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				return m
			}
			return fmt.Sprintf("@%.0f ms", float64(v-epoch))
		})
	}

	// Rows: events, with a break before an event that follows a gap.
	type row struct {
		y, h  int
		e     *Event
		label string // a break's
	}
	const (
		laneW  = 76
		rowH   = 22
		breakH = 30
		top    = 34
		timeW  = 150
	)
	var rows []row
	y := top
	lastClock := int64(-1)
	for i := range drawn {
		e := &drawn[i]
		if i > 0 {
			label := ""
			switch {
			case e.Clock >= 0 && lastClock >= 0 && e.Clock-lastClock >= clockBreakMs:
				label = fmt.Sprintf("⋯ the injected clock moves on %s ms (t=%d → t=%d), without anybody waiting ⋯",
					groupDigits(e.Clock-lastClock), lastClock, e.Clock)
			case !clocked && drawn[i-1].Lane == LaneHarness && strings.HasPrefix(drawn[i-1].Text, "wait "):
				label = fmt.Sprintf("⋯ %.0f ms of real time pass while the harness waits ⋯", ms(e.At-drawn[i-1].At))
			}
			if label != "" {
				rows = append(rows, row{y: y, h: breakH, label: label})
				y += breakH
			}
		}
		if e.Clock >= 0 {
			lastClock = e.Clock
		}
		rows = append(rows, row{y: y, h: rowH, e: e})
		y += rowH
	}
	col := map[string]int{}
	for i, l := range lanes {
		col[l] = i
	}
	laneX := func(l string) int { return col[l]*laneW + laneW/2 }
	textX := len(lanes)*laneW + 10
	width := textX + timeW + 620
	height := y + 12
	if len(summary) > 0 {
		height += 10 + 26*len(summary)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="timeline" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="timeline">`,
		template.HTMLEscapeString(id), width, height, width, height)
	b.WriteString(`<defs><marker id="` + template.HTMLEscapeString(id) + `-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#c0392b"/></marker></defs>`)
	b.WriteString(`<style>text{font:12px ui-monospace,Menlo,Consolas,monospace}.lane{font-weight:bold}.bad{fill:#c0392b}.brk{font-style:italic;fill:#666}.sum{font-weight:bold;fill:#1b5e20}</style>`)
	for i, l := range lanes {
		x := i*laneW + laneW/2
		c := colorOf(l)
		fmt.Fprintf(&b, `<text class="lane" x="%d" y="18" text-anchor="middle" fill="%s">%s</text>`, x, c, template.HTMLEscapeString(l))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-opacity="0.3" stroke-width="2"/>`, x, top-8, x, y+6, c)
	}
	fmt.Fprintf(&b, `<text class="lane" x="%d" y="18">real time · clock</text>`, textX)
	fmt.Fprintf(&b, `<text class="lane" x="%d" y="18">event</text>`, textX+timeW)
	n := 0
	for _, r := range rows {
		if r.e == nil {
			// A break: the lifelines cut by two zigzags, and what passed.
			fmt.Fprintf(&b, `<g class="break"><rect x="0" y="%d" width="%d" height="%d" fill="#fff"/>`, r.y, width, r.h)
			for _, dy := range []int{8, 14} {
				fmt.Fprintf(&b, `<path d="M0 %d`, r.y+dy)
				for x := 0; x < textX; x += 8 {
					fmt.Fprintf(&b, ` l4 %d l4 %d`, -3, 3)
				}
				b.WriteString(`" fill="none" stroke="#999" stroke-width="1"/>`)
			}
			fmt.Fprintf(&b, `<text class="brk" x="%d" y="%d">%s</text></g>`, textX, r.y+r.h/2+4, template.HTMLEscapeString(r.label))
			continue
		}
		e := r.e
		cy := r.y + r.h/2
		x := laneX(e.Lane)
		c := colorOf(e.Lane)
		cls := "ev"
		if e.Bad {
			c, cls = "#c0392b", "ev bad"
		}
		if n%2 == 0 {
			fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f4f4f4"/>`, r.y, width, r.h)
		}
		n++
		target, isKill := strings.CutPrefix(e.Text, "SIGKILL ")
		if l, ok := procLane[target]; ok {
			target = l
		}
		switch {
		case e.Kind == "kill" && isKill && seenLane[target] && target != e.Lane:
			// From the killer to the killed: an arrow whose head stops just
			// short of the target's lifeline.
			end := laneX(target) + 8
			if laneX(target) > x {
				end = laneX(target) - 8
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="8" height="8" fill="%s"/>`, x-4, cy-4, colorOf(e.Lane))
			fmt.Fprintf(&b, `<line class="%s" data-kind="%s" data-target="%s" x1="%d" y1="%d" x2="%d" y2="%d" stroke="#c0392b" stroke-width="2.5" marker-end="url(#%s-arrow)"/>`,
				cls, e.Kind, template.HTMLEscapeString(target), x, cy, end, cy, template.HTMLEscapeString(id))
		case e.Kind == "kill" || (e.Kind == "exit" && e.Bad):
			fmt.Fprintf(&b, `<path class="%s" data-kind="%s" d="M%d %d l12 12 m0 -12 l-12 12" stroke="%s" stroke-width="3"/>`, cls, e.Kind, x-6, cy-6, c)
		default:
			fmt.Fprintf(&b, `<circle class="%s" data-kind="%s" cx="%d" cy="%d" r="6" fill="%s"/>`, cls, e.Kind, x, cy, c)
		}
		clock := ""
		if e.Clock >= 0 {
			clock = " · t=" + strconv.FormatInt(e.Clock, 10)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%.1f ms%s</text>`, textX, cy+4, ms(e.At), clock)
		weight := ""
		if e.Bad {
			weight = ` font-weight="bold"`
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s"%s><tspan fill="%s">%s:</tspan> %s</text>`, textX+timeW, cy+4, c, weight, colorOf(e.Lane),
			template.HTMLEscapeString(e.Lane), template.HTMLEscapeString(relative(e.Text)))
	}
	sy := y + 10
	for _, e := range summary {
		fmt.Fprintf(&b, `<g class="summary"><rect x="0" y="%d" width="%d" height="22" fill="#e8f5e9" stroke="#2e7d32"/>`, sy, width)
		fmt.Fprintf(&b, `<text class="sum" x="8" y="%d">✓ %s</text></g>`, sy+15, template.HTMLEscapeString(relative(e.Text)))
		sy += 26
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// groupDigits writes n with thin spaces between thousands: 29 999.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

func colorOf(lane string) string {
	if c, ok := laneColor[lane]; ok {
		return c
	}
	return "#d62728" // a third sender
}

// HTMLReport is what WriteHTML renders.
type HTMLReport struct {
	Title   string
	Bin     string
	When    time.Time
	Took    time.Duration
	Results []Result
}

// WriteHTML writes a self-contained page (inline CSS and SVG, no scripts, no
// network): the verdict of each step, its failure explained, and the timeline
// of step 8's crash story (and of any failed step).
func WriteHTML(w io.Writer, rep HTMLReport) error {
	return htmlTmpl.Execute(w, rep)
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs": func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) },
	// code shows `x` as <code>x</code>, escaping everything else.
	"code": func(s string) template.HTML {
		parts := strings.Split(s, "`")
		var b strings.Builder
		for i, p := range parts {
			if i%2 == 1 && i < len(parts)-1 {
				b.WriteString("<code>" + template.HTMLEscapeString(p) + "</code>")
			} else {
				if i%2 == 1 {
					b.WriteString("`")
				}
				b.WriteString(template.HTMLEscapeString(p))
			}
		}
		return template.HTML(b.String())
	},
	"passed": func(rs []Result) int {
		n := 0
		for _, r := range rs {
			if r.Pass {
				n++
			}
		}
		return n
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#222}
h1{font-size:1.5rem;margin-bottom:.2rem} .meta{color:#666;margin-top:0}
table.steps{border-collapse:collapse;width:100%;margin:1rem 0}
table.steps td,table.steps th{padding:.45rem .6rem;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
.PASS{color:#fff;background:#2e7d32;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.FAIL{color:#fff;background:#c62828;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.TIMEOUT{color:#fff;background:#b35c00;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.why{color:#555;font-size:.9em}
.fail{background:#fff3f3;border-left:4px solid #c62828;padding:.5rem .8rem;margin:.4rem 0;white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em}
section.step{margin:2rem 0} .tl{overflow-x:auto;border:1px solid #ddd;border-radius:6px;margin:.5rem 0 1.2rem}
h3{margin:.8rem 0 .2rem;font-size:1rem}
details pre{white-space:pre-wrap;font-size:.8em;background:#fafafa;padding:.6rem;border:1px solid #eee}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="meta">{{passed .Results}} of {{len .Results}} steps passed in {{secs .Took}} · executables: <code>{{.Bin}}</code> · {{.When.Format "2006-01-02 15:04:05 MST"}}</p>
<table class="steps" id="steps">
<tr><th></th><th>step</th><th>what it checks · why it matters</th><th>time</th></tr>
{{range .Results}}<tr id="step-{{.Step.Num}}">
<td><span class="{{.Verdict}}">{{.Verdict}}</span></td>
<td><b>{{.Step.Num}}</b>&nbsp;{{.Step.Slug}}</td>
<td><b>{{.Step.Title}}</b><br>{{code .Step.Checks}}<br><span class="why">Why: {{code .Step.Why}}</span>
{{if not .Pass}}<div class="fail">{{.Detail}}</div>{{end}}</td>
<td>{{secs .Took}}</td></tr>
{{end}}</table>
{{range .Results}}{{if or (eq .Step.Num 8) (not .Pass)}}
<section class="step" id="timelines-step{{.Step.Num}}">
<h2>Step {{.Step.Num}}: {{.Step.Title}} — timeline</h2>
<p class="why">Top to bottom in real time; one column per process. A red arrow is a kill, a cross a crash exit; red is a refusal or a failure. <i>t=</i> is the injected clock the event ran under; a zigzag break marks the clock moving on (or, on the real clock, time passing); <i>@N ms</i> is a real-clock instant, on the real-time column's scale. The green line says what the story came to.</p>
{{range .Timelines}}<h3>{{.Title}}</h3><div class="tl">{{.SVG}}</div>{{end}}
<details><summary>the story, as the harness told it</summary><pre>{{.Narrative}}</pre></details>
</section>{{end}}{{end}}
</body></html>
`))
