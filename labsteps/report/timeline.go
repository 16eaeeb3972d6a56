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
	c := newChart(id, events)
	c.layOutRows()
	var b strings.Builder
	c.drawHead(&b)
	n := 0
	for _, r := range c.rows {
		if r.e == nil {
			c.drawBreak(&b, r)
			continue
		}
		c.drawEvent(&b, r, n%2 == 0)
		n++
	}
	c.drawSummary(&b)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// The timeline's geometry, in SVG units.
const (
	laneW  = 76 // a lane's column
	rowH   = 22 // an event's row
	breakH = 30 // a break's row
	top    = 34 // the first row's top, below the lane names
	timeW  = 150
)

// chart is one timeline being drawn: its events sorted into lanes and laid
// out in rows.
type chart struct {
	id       string
	drawn    []result.Event // the events with a row, in order
	summary  []result.Event
	epoch    int64 // the section's wall-clock start in ms; -1 when none
	clocked  bool  // some event ran under the injected clock
	lanes    []string
	seenLane map[string]bool
	procLane map[string]string // a process's lane, from its start event
	col      map[string]int    // a lane's column
	rows     []timelineRow
	bottom   int // below the last row
	textX    int // where the text columns begin
	width    int
}

// timelineRow is one row: an event, or a break before an event that
// follows a gap.
type timelineRow struct {
	y, h  int
	e     *result.Event
	label string // a break's
}

// newChart sorts events into the drawn ones, the summaries and the epoch,
// and orders the lanes they ran in.
func newChart(id string, events []result.Event) *chart {
	c := &chart{id: id, epoch: -1, seenLane: map[string]bool{}, procLane: map[string]string{}}
	for _, e := range events {
		switch e.Kind {
		case result.KindEpoch:
			c.epoch, _ = strconv.ParseInt(e.Text, 10, 64)
			continue
		case result.KindSummary:
			c.summary = append(c.summary, e)
			continue
		}
		c.drawn = append(c.drawn, e)
		if name, ok := strings.CutPrefix(e.Text, "start "); ok && e.Kind == "start" {
			c.procLane[name] = e.Lane
		}
		c.clocked = c.clocked || e.Clock >= 0
		if !c.seenLane[e.Lane] {
			c.seenLane[e.Lane] = true
			c.lanes = append(c.lanes, e.Lane)
		}
	}
	sort.SliceStable(c.lanes, func(i, j int) bool { return laneRank(c.lanes[i]) < laneRank(c.lanes[j]) })
	c.col = map[string]int{}
	for i, l := range c.lanes {
		c.col[l] = i
	}
	c.textX = len(c.lanes)*laneW + 10
	c.width = c.textX + timeW + 620
	return c
}

// laneRank orders the lanes: senders first (A, B, then any other), then
// the receiver, queuectl, the harness.
func laneRank(l string) int {
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

// relative shows the wall-clock instants in text relative to the epoch.
func (c *chart) relative(text string) string {
	if c.epoch < 0 {
		return text
	}
	return epochMs.ReplaceAllStringFunc(text, func(m string) string {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return m
		}
		return fmt.Sprintf("@%.0f ms", float64(v-c.epoch))
	})
}

// layOutRows gives each event its row, with a break before an event that
// follows a jump of the injected clock or a wait of the harness.
func (c *chart) layOutRows() {
	y := top
	lastClock := int64(-1)
	for i := range c.drawn {
		e := &c.drawn[i]
		if i > 0 {
			label := ""
			switch {
			case e.Clock >= 0 && lastClock >= 0 && e.Clock-lastClock >= clockBreakMs:
				label = fmt.Sprintf("⋯ the injected clock moves on %s ms (t=%d → t=%d), without anybody waiting ⋯",
					groupDigits(e.Clock-lastClock), lastClock, e.Clock)
			case !c.clocked && c.drawn[i-1].Lane == result.LaneHarness && strings.HasPrefix(c.drawn[i-1].Text, "wait "):
				label = fmt.Sprintf("⋯ %.0f ms of real time pass while the harness waits ⋯", ms(e.At-c.drawn[i-1].At))
			}
			if label != "" {
				c.rows = append(c.rows, timelineRow{y: y, h: breakH, label: label})
				y += breakH
			}
		}
		if e.Clock >= 0 {
			lastClock = e.Clock
		}
		c.rows = append(c.rows, timelineRow{y: y, h: rowH, e: e})
		y += rowH
	}
	c.bottom = y
}

// laneX is the x of lane l's lifeline.
func (c *chart) laneX(l string) int { return c.col[l]*laneW + laneW/2 }

// drawHead opens the SVG and draws the lanes' names and lifelines and the
// text columns' titles.
func (c *chart) drawHead(b *strings.Builder) {
	height := c.bottom + 12
	if len(c.summary) > 0 {
		height += 10 + 26*len(c.summary)
	}
	fmt.Fprintf(b, `<svg id="%s" class="timeline" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="timeline">`,
		template.HTMLEscapeString(c.id), c.width, height, c.width, height)
	b.WriteString(`<defs><marker id="` + template.HTMLEscapeString(c.id) + `-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="#c0392b"/></marker></defs>`)
	b.WriteString(`<style>text{font:12px ui-monospace,Menlo,Consolas,monospace}.lane{font-weight:bold}.bad{fill:#c0392b}.brk{font-style:italic;fill:#666}.sum{font-weight:bold;fill:#1b5e20}</style>`)
	for i, l := range c.lanes {
		x := i*laneW + laneW/2
		col := colorOf(l)
		fmt.Fprintf(b, `<text class="lane" x="%d" y="18" text-anchor="middle" fill="%s">%s</text>`, x, col, template.HTMLEscapeString(l))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-opacity="0.3" stroke-width="2"/>`, x, top-8, x, c.bottom+6, col)
	}
	fmt.Fprintf(b, `<text class="lane" x="%d" y="18">real time · clock</text>`, c.textX)
	fmt.Fprintf(b, `<text class="lane" x="%d" y="18">event</text>`, c.textX+timeW)
}

// drawBreak draws a break: the lifelines cut by two zigzags, and what
// passed.
func (c *chart) drawBreak(b *strings.Builder, r timelineRow) {
	fmt.Fprintf(b, `<g class="break"><rect x="0" y="%d" width="%d" height="%d" fill="#fff"/>`, r.y, c.width, r.h)
	for _, dy := range []int{8, 14} {
		fmt.Fprintf(b, `<path d="M0 %d`, r.y+dy)
		for x := 0; x < c.textX; x += 8 {
			fmt.Fprintf(b, ` l4 %d l4 %d`, -3, 3)
		}
		b.WriteString(`" fill="none" stroke="#999" stroke-width="1"/>`)
	}
	fmt.Fprintf(b, `<text class="brk" x="%d" y="%d">%s</text></g>`, c.textX, r.y+r.h/2+4, template.HTMLEscapeString(r.label))
}

// drawEvent draws an event's row: a stripe on every other one, its mark in
// its lane, its times and its text.
func (c *chart) drawEvent(b *strings.Builder, r timelineRow, striped bool) {
	e := r.e
	cy := r.y + r.h/2
	col := colorOf(e.Lane)
	cls := "ev"
	if e.Bad {
		col, cls = "#c0392b", "ev bad"
	}
	if striped {
		fmt.Fprintf(b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f4f4f4"/>`, r.y, c.width, r.h)
	}
	c.drawMark(b, e, cy, col, cls)
	clock := ""
	if e.Clock >= 0 {
		clock = " · t=" + strconv.FormatInt(e.Clock, 10)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555">%.1f ms%s</text>`, c.textX, cy+4, ms(e.At), clock)
	weight := ""
	if e.Bad {
		weight = ` font-weight="bold"`
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s"%s><tspan fill="%s">%s:</tspan> %s</text>`, c.textX+timeW, cy+4, col, weight, colorOf(e.Lane),
		template.HTMLEscapeString(e.Lane), template.HTMLEscapeString(c.relative(e.Text)))
}

// drawMark draws an event's mark in its lane: a kill is an arrow from the
// killer to the killed, a kill or crash exit without one a cross, anything
// else a dot.
func (c *chart) drawMark(b *strings.Builder, e *result.Event, cy int, col, cls string) {
	x := c.laneX(e.Lane)
	target, isKill := strings.CutPrefix(e.Text, "SIGKILL ")
	if l, ok := c.procLane[target]; ok {
		target = l
	}
	switch {
	case e.Kind == "kill" && isKill && c.seenLane[target] && target != e.Lane:
		// From the killer to the killed: an arrow whose head stops just
		// short of the target's lifeline.
		end := c.laneX(target) + 8
		if c.laneX(target) > x {
			end = c.laneX(target) - 8
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="8" height="8" fill="%s"/>`, x-4, cy-4, colorOf(e.Lane))
		fmt.Fprintf(b, `<line class="%s" data-kind="%s" data-target="%s" x1="%d" y1="%d" x2="%d" y2="%d" stroke="#c0392b" stroke-width="2.5" marker-end="url(#%s-arrow)"/>`,
			cls, e.Kind, template.HTMLEscapeString(target), x, cy, end, cy, template.HTMLEscapeString(c.id))
	case e.Kind == "kill" || (e.Kind == "exit" && e.Bad):
		fmt.Fprintf(b, `<path class="%s" data-kind="%s" d="M%d %d l12 12 m0 -12 l-12 12" stroke="%s" stroke-width="3"/>`, cls, e.Kind, x-6, cy-6, col)
	default:
		fmt.Fprintf(b, `<circle class="%s" data-kind="%s" cx="%d" cy="%d" r="6" fill="%s"/>`, cls, e.Kind, x, cy, col)
	}
}

// drawSummary closes the chart with one line for each summary event.
func (c *chart) drawSummary(b *strings.Builder) {
	sy := c.bottom + 10
	for _, e := range c.summary {
		fmt.Fprintf(b, `<g class="summary"><rect x="0" y="%d" width="%d" height="22" fill="#e8f5e9" stroke="#2e7d32"/>`, sy, c.width)
		fmt.Fprintf(b, `<text class="sum" x="8" y="%d">✓ %s</text></g>`, sy+15, template.HTMLEscapeString(c.relative(e.Text)))
		sy += 26
	}
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
