package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"snacklab/queue"
)

// Waiter paces a bulk redrive: Wait returns when the next job may go, or
// with ctx's error when the operator gave up. *rate.Limiter satisfies it.
type Waiter interface {
	Wait(ctx context.Context) error
}

// Clock is the time a Pacer sees. Tests inject one whose Sleep only moves
// time forward, so the pacing is checked exactly and without waiting.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pacer is a token bucket (golang.org/x/time/rate) with a burst of one, read
// through a Clock. A burst of one is the point: after an outage the first
// jobs must not go out in a clump that recreates the load.
type Pacer struct {
	lim   *rate.Limiter
	clock Clock
}

// NewPacer lets perSecond jobs go per second at most, timed by clock (nil
// means the wall clock).
func NewPacer(perSecond float64, clock Clock) *Pacer {
	if clock == nil {
		clock = RealClock{}
	}
	return &Pacer{lim: rate.NewLimiter(rate.Limit(perSecond), 1), clock: clock}
}

// Wait takes one token, sleeping on the clock until there is one. The token
// is taken at the instant Wait returns, not at a reserved instant in the
// future: if a sleep overshoots, the next job is still a full interval after
// this one, so the rate holds for the redrives as they really happen, not
// only on the limiter's books.
func (p *Pacer) Wait(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := p.clock.Now()
		if p.lim.AllowN(now, 1) {
			return nil
		}
		missing := 1 - p.lim.TokensAt(now)
		d := time.Duration(math.Ceil(missing / float64(p.lim.Limit()) * float64(time.Second)))
		if err := p.clock.Sleep(ctx, max(d, time.Nanosecond)); err != nil {
			return err
		}
	}
}

// MaxRate bounds --rate: faster than this is not pacing.
const MaxRate = 1000

// ParseRate reads a rate such as "5/s", "0.5/s", "30/m" or "600/h" into jobs
// per second. The unit is required so that nobody types 100 meaning per
// minute and gets per second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(s, "/")
	per := map[string]float64{"s": 1, "m": 60, "min": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !ok || per == 0 || err != nil || !(n > 0) {
		return 0, fmt.Errorf("%w: rate %q: want N/s, N/m or N/h with N > 0, e.g. 5/s", queue.ErrInvalid, s)
	}
	r := n / per
	if r > MaxRate {
		return 0, fmt.Errorf("%w: rate %q: at most %d/s", queue.ErrInvalid, s, MaxRate)
	}
	return r, nil
}

// Step is one job handled by a bulk redrive.
type Step struct {
	N      int    // 1-based position among the candidates
	Total  int    // candidates
	ID     string // job id
	Action string // "redriven", "skipped" or "would redrive"
	Detail string // what it was, or why it was skipped
}

// Progress is told about each job as it happens. Bar and Lines are the two
// renderings; nil shows nothing.
type Progress interface {
	Step(Step)
	End(BulkResult)
}

// BulkRedrive redrives the dead jobs of one reason, oldest first, one job per
// transaction through queue.Redrive (so each gets its own audit row), no
// faster than Pace allows. Cancelling the context stops it between jobs: a
// job is either redriven with its audit row or untouched, never half done.
type BulkRedrive struct {
	Reason queue.Reason
	Note   string
	Limit  int  // at most this many candidates, oldest first; 0 means all
	DryRun bool // list the candidates, change nothing
	// Pace is waited on before each redrive. Required unless DryRun.
	Pace Waiter
	// NowMs is the clock of each audit row (at_ms); nil means the wall clock.
	NowMs    func() int64
	Progress Progress
}

// Skip is a candidate left alone, because someone else redrove it (or it
// changed) since the list was read. Re-running a bulk redrive relies on this.
type Skip struct {
	ID     string       `json:"id"`
	State  queue.State  `json:"state"`
	Reason queue.Reason `json:"reason,omitempty"`
}

// BulkResult is what a bulk redrive did, complete even when interrupted.
type BulkResult struct {
	Reason       queue.Reason `json:"reason"`
	Note         string       `json:"note"`
	DryRun       bool         `json:"dry_run"`
	Candidates   int          `json:"candidates"`
	Redriven     []string     `json:"redriven"`
	WouldRedrive []string     `json:"would_redrive,omitempty"`
	Skipped      []Skip       `json:"skipped"`
	NotAttempted int          `json:"not_attempted"` // candidates left when it stopped
	Interrupted  bool         `json:"interrupted"`
}

// Run does the bulk redrive. It returns what was done even with an error.
func (b BulkRedrive) Run(ctx context.Context, q *queue.Queue) (BulkResult, error) {
	res := BulkResult{Reason: b.Reason, Note: b.Note, DryRun: b.DryRun, Redriven: []string{}, Skipped: []Skip{}}
	if _, err := queue.ParseReason(string(b.Reason)); err != nil {
		return res, err
	}
	if err := queue.CheckNote(b.Note); err != nil {
		return res, err
	}
	if b.Limit < 0 {
		return res, fmt.Errorf("%w: limit %d: want >= 0 (0 means all)", queue.ErrInvalid, b.Limit)
	}
	if b.Pace == nil && !b.DryRun {
		return res, errors.New("bulk redrive: no pace given")
	}
	nowMs := b.NowMs
	if nowMs == nil {
		nowMs = func() int64 { return time.Now().UnixMilli() }
	}
	// Each job's own work runs to its end even after Ctrl-C; only the wait
	// between jobs is interrupted. So "interrupted" always means "between jobs".
	work := context.WithoutCancel(ctx)
	jobs, err := q.ListDead(work, b.Reason, queue.AllDead)
	if err != nil {
		return res, err
	}
	if b.Limit > 0 && len(jobs) > b.Limit {
		jobs = jobs[:b.Limit]
	}
	res.Candidates = len(jobs)
	step := func(s Step) {
		if b.Progress != nil {
			s.Total = res.Candidates
			b.Progress.Step(s)
		}
	}
	defer func() {
		if b.Progress != nil {
			b.Progress.End(res)
		}
	}()
	if b.DryRun {
		res.WouldRedrive = []string{}
		for i, j := range jobs {
			res.WouldRedrive = append(res.WouldRedrive, j.ID)
			step(Step{N: i + 1, ID: j.ID, Action: "would redrive", Detail: fmt.Sprintf("%s, token %d", j.Reason, j.Token)})
		}
		return res, nil
	}
	for i, j := range jobs {
		if ctx.Err() != nil {
			res.Interrupted, res.NotAttempted = true, len(jobs)-i
			return res, nil
		}
		// Skip what is no longer dead (or no longer dead for this reason)
		// before spending a token on it.
		cur, err := q.Get(work, j.ID)
		if err != nil {
			res.NotAttempted = len(jobs) - i
			return res, err
		}
		if cur.State != queue.Dead || cur.Reason != b.Reason {
			res.Skipped = append(res.Skipped, Skip{ID: j.ID, State: cur.State, Reason: cur.Reason})
			step(Step{N: i + 1, ID: j.ID, Action: "skipped", Detail: "now " + describe(cur.State, cur.Reason)})
			continue
		}
		if err := b.Pace.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				res.Interrupted, res.NotAttempted = true, len(jobs)-i
				return res, nil
			}
			res.NotAttempted = len(jobs) - i
			return res, err
		}
		// Someone may have redriven it during the wait: queue.Redrive refuses
		// a job that is not dead, writing nothing, and that is a skip.
		job, rd, err := q.Redrive(work, j.ID, b.Note, nowMs())
		switch {
		case errors.Is(err, queue.ErrRedrivePending), errors.Is(err, queue.ErrRedriveLeased), errors.Is(err, queue.ErrRedriveDone):
			res.Skipped = append(res.Skipped, Skip{ID: j.ID, State: job.State})
			step(Step{N: i + 1, ID: j.ID, Action: "skipped", Detail: "now " + describe(job.State, "")})
			continue
		case err != nil:
			res.NotAttempted = len(jobs) - i
			return res, err
		}
		res.Redriven = append(res.Redriven, j.ID)
		step(Step{N: i + 1, ID: j.ID, Action: "redriven", Detail: fmt.Sprintf("was %s, token stays %d", rd.PrevReason, job.Token)})
	}
	return res, nil
}

func describe(st queue.State, reason queue.Reason) string {
	if reason != "" {
		return string(st) + " (" + string(reason) + ")"
	}
	return string(st)
}

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
