package report

import (
	"fmt"
	"html/template"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps/result"
)

// Timeline is one section of a step's events, drawn as an SVG swimlane chart.
type Timeline struct {
	ID      string
	Title   string
	SVG     template.HTML
	NEvents int
}

// Timelines splits a result's events by section and draws each.
func Timelines(r result.Result) []Timeline {
	var order []string
	by := map[string][]result.Event{}
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
	"A": "#1f77b4", "B": "#2ca02c", "S": "#e377c2", result.LaneReceiver: "#9467bd", result.LaneQueuectl: "#8c564b", result.LaneHarness: "#7f7f7f",
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
func timelineSVG(id string, events []result.Event) template.HTML {
	// Senders first (A, B, then any other), then the receiver, queuectl, the harness.
	rank := func(l string) int {
		switch l {
		case "A":
			return 0
		case "B":
			return 1
		case result.LaneReceiver:
			return 3
		case result.LaneQueuectl:
			return 4
		case result.LaneHarness:
			return 5
		}
		return 2
	}
	var (
		drawn    []result.Event
		summary  []result.Event
		epoch    int64 = -1
		clocked  bool
		lanes    []string
		seenLane = map[string]bool{}
		procLane = map[string]string{} // a process's lane, from its start event
	)
	for _, e := range events {
		switch e.Kind {
		case result.KindEpoch:
			epoch, _ = strconv.ParseInt(e.Text, 10, 64)
			continue
		case result.KindSummary:
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
		e     *result.Event
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
			case !clocked && drawn[i-1].Lane == result.LaneHarness && strings.HasPrefix(drawn[i-1].Text, "wait "):
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

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
