package ops

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Lines prints one plain line per job: for logs, pipes and cron mail.
func Lines(w io.Writer) Progress { return &lines{w: w} }

type lines struct{ w io.Writer }

func (l *lines) Step(s Step) {
	fmt.Fprintf(l.w, "[%d/%d] %s %s (%s)\n", s.N, s.Total, s.ID, s.Action, s.Detail)
}

func (l *lines) End(BulkResult) {}

// Bar redraws one progress line in place, for a person at a terminal
// columns wide: the bar, the count, the rate so far and the time left at that
// rate, and the job just handled.
//
//	[##########..........] 12/40  redriven 11  skipped 1  2.0/s  ETA 14s  job-011
//
// The line never reaches the last column (a terminal would wrap it and every
// redraw would leave a line behind): the bar shrinks to fit, down to 10
// cells, then the job id goes, then the line is cut. now is the clock the
// rate is measured on (nil: the wall clock).
func Bar(w io.Writer, columns int, now func() time.Time) Progress {
	if now == nil {
		now = time.Now
	}
	if columns <= 0 {
		columns = DefaultColumns
	}
	return &bar{w: w, columns: columns, now: now}
}

// DefaultColumns is the terminal width Bar assumes when it is not known.
const DefaultColumns = 80

type bar struct {
	w             io.Writer
	columns       int
	now           func() time.Time
	done, skipped int
	doneLabel     string
	drawn         bool
	first         time.Time // when the first job was handled
	n, total      int
	id            string
}

func (b *bar) Step(s Step) {
	switch s.Action {
	case "skipped":
		b.skipped++
	default:
		b.done++
		b.doneLabel = s.Action
	}
	if b.first.IsZero() {
		b.first = b.now()
	}
	b.n, b.total, b.id = s.N, s.Total, s.ID
	b.draw()
}

// rateETA is the pace so far (jobs handled after the first, over the time
// since the first: the first goes at once, so counting it would overstate
// the pace) and the time the rest take at it; "-" until it is known.
func (b *bar) rateETA() (string, string) {
	el := b.now().Sub(b.first)
	if b.n < 2 || el <= 0 {
		return "-/s", "-"
	}
	perSec := float64(b.n-1) / el.Seconds()
	r := strconv.FormatFloat(perSec, 'f', 1, 64) + "/s"
	switch {
	case perSec >= 10:
		r = strconv.FormatFloat(perSec, 'f', 0, 64) + "/s"
	case perSec < 1:
		r = strconv.FormatFloat(perSec*60, 'f', 1, 64) + "/m"
	}
	// Whole seconds, rounded up: an ETA should not promise more than the pace.
	left := time.Duration(math.Ceil(float64(b.total-b.n)/perSec)) * time.Second
	return r, HumanDuration(left)
}

func (b *bar) draw() {
	label := b.doneLabel
	if label == "" {
		label = "redriven"
	}
	rate, eta := b.rateETA()
	stats := fmt.Sprintf(" %d/%d  %s %d  skipped %d  %s  ETA %s", b.n, b.total, label, b.done, b.skipped, rate, eta)
	room := b.columns - 1 // never the last column
	const minCells, maxCells = 10, 40
	text := stats + "  " + b.id
	cells := room - 2 - len(text)
	if cells < minCells {
		text = stats
		cells = room - 2 - len(text)
	}
	cells = min(max(cells, minCells), maxCells)
	filled := 0
	if b.total > 0 {
		filled = cells * b.n / b.total
	}
	line := "[" + strings.Repeat("#", filled) + strings.Repeat(".", cells-filled) + "]" + text
	if len(line) > room {
		line = line[:max(room, 0)]
	}
	// \r and clear-to-end-of-line: redraw in place, whatever was longer before.
	fmt.Fprintf(b.w, "\r\x1b[K%s", line)
	b.drawn = true
}

func (b *bar) End(BulkResult) {
	if b.drawn {
		fmt.Fprint(b.w, "\n")
	}
}
