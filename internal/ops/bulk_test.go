package ops_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
	"snacklab/queue"
)

// fakeClock only moves when someone sleeps on it, so pacing is measured
// exactly and the test never waits.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	return nil
}

// noPace lets every job go at once, for tests about correctness, not pace.
type noPace struct{}

func (noPace) Wait(ctx context.Context) error { return ctx.Err() }

// waitHook runs fn before the nth Wait (1-based) and then waits on next.
type waitHook struct {
	mu   sync.Mutex
	n    int
	at   map[int]func()
	next ops.Waiter
}

func (w *waitHook) Wait(ctx context.Context) error {
	w.mu.Lock()
	w.n++
	fn := w.at[w.n]
	w.mu.Unlock()
	if fn != nil {
		fn()
	}
	return w.next.Wait(ctx)
}

// stepHook calls fn on every step, then forwards nothing.
type stepHook struct{ fn func(ops.Step) }

func (s stepHook) Step(st ops.Step)   { s.fn(st) }
func (s stepHook) End(ops.BulkResult) {}

func history(t *testing.T, q *queue.Queue, id string) queue.History {
	t.Helper()
	h, err := q.Show(context.Background(), id)
	if err != nil {
		t.Fatalf("show %s: %v", id, err)
	}
	return h
}

// checkAtomic asserts that every job is either redriven with exactly one
// audit row under note or still dead with none, and that redriven lists
// exactly the former.
func checkAtomic(t *testing.T, q *queue.Queue, ids, redriven []string, note string) {
	t.Helper()
	for _, id := range ids {
		h := history(t, q, id)
		switch {
		case h.Job.State == queue.Pending && len(h.Redrives) == 1 && h.Redrives[0].Note == note:
			if !slices.Contains(redriven, id) {
				t.Errorf("%s was redriven but the result does not say so", id)
			}
		case h.Job.State == queue.Dead && len(h.Redrives) == 0:
			if slices.Contains(redriven, id) {
				t.Errorf("%s is reported redriven but is still dead", id)
			}
		default:
			t.Errorf("%s: state %s with %d audit rows: want pending with 1 or dead with 0", id, h.Job.State, len(h.Redrives))
		}
	}
}

// TestBulkRedriveRateNeverExceeded paces 60 redrives on an injected clock and
// reads the pace back from the audit rows: no two redrives are closer than
// 1/rate, so no window of any length holds more than the rate allows.
func TestBulkRedriveRateNeverExceeded(t *testing.T) {
	for _, perSecond := range []float64{20, 8, 1000, 0.5} {
		t.Run(strings.TrimRight(strings.TrimRight(time.Duration(float64(time.Second)/perSecond).String(), "0"), "."), func(t *testing.T) {
			const n = 60
			q, _ := opstest.NewFile(t)
			all := opstest.DeadBatch(t, q, "job", n, 1000)
			clock := newFakeClock()
			var stamps []time.Time
			b := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-9", Pace: ops.NewPacer(perSecond, clock),
				NowMs: func() int64 {
					now := clock.Now()
					stamps = append(stamps, now)
					return now.UnixMilli()
				}}
			res, err := b.Run(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(res.Redriven), n; got != want {
				t.Fatalf("redriven %d, want %d", got, want)
			}
			checkAtomic(t, q, all, res.Redriven, "INC-9")
			gap := time.Duration(float64(time.Second) / perSecond)
			for i := 1; i < len(stamps); i++ {
				if d := stamps[i].Sub(stamps[i-1]); d < gap {
					t.Fatalf("redrives %d and %d are %s apart, want >= %s", i-1, i, d, gap)
				}
			}
			// The audit rows, in ms, tell the same story.
			var at []int64
			for _, id := range all {
				at = append(at, history(t, q, id).Redrives[0].AtMs)
			}
			sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
			span := time.Duration(at[n-1]-at[0]) * time.Millisecond
			if minSpan := time.Duration(n-1) * gap; span < minSpan.Truncate(time.Millisecond) {
				t.Fatalf("%d redrives in %s, want >= %s", n, span, minSpan)
			}
			if observed := float64(n-1) / span.Seconds(); observed > perSecond {
				t.Fatalf("observed %.3f/s, limit %v/s", observed, perSecond)
			}
			t.Logf("rate %v/s: %d redrives over %s of injected time, observed %.3f/s; %d sleeps",
				perSecond, n, span, float64(n-1)/span.Seconds(), len(clock.sleeps))
		})
	}
}

// TestBulkRedriveRealClockBound runs the real limiter on the wall clock and
// checks only a lower bound on the elapsed time, which the token bucket
// guarantees however slow the machine is: it cannot flake.
func TestBulkRedriveRealClockBound(t *testing.T) {
	const n, perSecond = 50, 500.0
	q, _ := opstest.NewFile(t)
	opstest.DeadBatch(t, q, "job", n, 1000)
	var starts []time.Time
	start := time.Now()
	res, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-9", Pace: ops.NewPacer(perSecond, nil),
		NowMs: func() int64 { starts = append(starts, time.Now()); return 5000 }}.Run(context.Background(), q)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Redriven), n; got != want {
		t.Fatalf("redriven %d, want %d", got, want)
	}
	if min := time.Duration(float64(n-1) / perSecond * float64(time.Second)); elapsed < min {
		t.Fatalf("%d redrives at %v/s took %s, the limiter allows no less than %s", n, perSecond, elapsed, min)
	}
	t.Logf("configured %v/s; observed %.1f/s between first and last redrive (%s for %d jobs)",
		perSecond, float64(n-1)/starts[n-1].Sub(starts[0]).Seconds(), elapsed, n)
}

// TestBulkRedriveInterrupted cancels mid-way, in the wait and between jobs:
// nothing is lost, nothing is written twice, and a re-run finishes the rest.
func TestBulkRedriveInterrupted(t *testing.T) {
	const n = 50
	for _, c := range []struct {
		name  string
		setup func(cancel context.CancelFunc, b *ops.BulkRedrive)
		want  int // redriven before the stop
	}{
		{"cancelled during the 20th wait", func(cancel context.CancelFunc, b *ops.BulkRedrive) {
			b.Pace = &waitHook{at: map[int]func(){20: cancel}, next: ops.NewPacer(10, newFakeClock())}
		}, 19},
		{"cancelled right after the 7th redrive", func(cancel context.CancelFunc, b *ops.BulkRedrive) {
			b.Progress = stepHook{func(s ops.Step) {
				if s.N == 7 {
					cancel()
				}
			}}
		}, 7},
		{"cancelled before the first", func(cancel context.CancelFunc, b *ops.BulkRedrive) { cancel() }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := opstest.NewFile(t)
			all := opstest.DeadBatch(t, q, "job", n, 1000)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-1", Pace: noPace{}, NowMs: func() int64 { return 9000 }}
			c.setup(cancel, &b)
			res, err := b.Run(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Interrupted {
				t.Fatal("result does not say interrupted")
			}
			if got, want := len(res.Redriven), c.want; got != want {
				t.Fatalf("redriven %d, want %d", got, want)
			}
			if got, want := res.NotAttempted, n-c.want; got != want {
				t.Fatalf("not attempted %d, want %d", got, want)
			}
			checkAtomic(t, q, all, res.Redriven, "INC-1")

			again, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-1", Pace: noPace{}}.Run(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(again.Redriven), n-c.want; got != want {
				t.Fatalf("re-run redrove %d, want %d", got, want)
			}
			checkAtomic(t, q, all, append(res.Redriven, again.Redriven...), "INC-1")
		})
	}
}

// TestBulkRedriveSkipsWhatOthersRedrove: a job redriven by someone else,
// before the run reaches it or during its wait, is skipped, not an error.
func TestBulkRedriveSkipsWhatOthersRedrove(t *testing.T) {
	q, path := opstest.NewFile(t)
	all := opstest.DeadBatch(t, q, "job", 10, 1000)
	other, err := queue.Open(path, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	byOther := func(id string) func() {
		return func() {
			if _, _, err := other.Redrive(context.Background(), id, "OTHER-1", 8000); err != nil {
				t.Errorf("other redrive %s: %v", id, err)
			}
		}
	}
	// Before the 3rd wait, someone redrives the 3rd job (the one being
	// waited for) and the 8th (which the run has not read yet).
	pace := &waitHook{at: map[int]func(){3: func() { byOther(all[2])(); byOther(all[7])() }}, next: noPace{}}
	res, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-2", Pace: pace}.Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, s := range res.Skipped {
		skipped = append(skipped, s.ID)
		if s.State != queue.Pending {
			t.Errorf("skip %s: state %s, want pending", s.ID, s.State)
		}
	}
	if want := []string{all[2], all[7]}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped %v, want %v", skipped, want)
	}
	if got, want := len(res.Redriven), 8; got != want {
		t.Fatalf("redriven %d, want %d", got, want)
	}
	if got, want := pace.n, 9; got != want {
		t.Fatalf("waits %d, want %d (no token spent on a job already skipped at read)", got, want)
	}
	for _, id := range all {
		if got, want := len(history(t, q, id).Redrives), 1; got != want {
			t.Errorf("%s: %d audit rows, want %d", id, got, want)
		}
	}
}

// TestBulkRedriveConcurrentRuns: two operators running the same bulk redrive
// on the same file at once never redrive a job twice.
//
// Both runs walk the same list in the same order, so they meet on every job:
// one takes the write lock, the other waits in SQLite's busy handler, which
// polls (sleeps up to 100 ms, retries) instead of queueing. The winner takes
// the lock again microseconds after each commit, so the loser can wait
// through the winner's whole run, not one transaction: measured here under
// load, one run redrove all 40 while the other waited as long and skipped all
// 40. One handle had the default 5 s busy timeout, so that wait fails with
// "database is locked" whenever the winner's 40 fsync'd commits take longer
// than 5 s, as they do on a loaded disk. Both handles therefore get a busy
// timeout far above any run's length. And the counts below hold only if both runs listed
// the 40 candidates before either redrove one; a goroutine started late
// under load listed fewer. together holds each run's first redrive until
// both have listed.
func TestBulkRedriveConcurrentRuns(t *testing.T) {
	const n = 40
	q0, path := opstest.NewFile(t)
	all := opstest.DeadBatch(t, q0, "job", n, 1000)
	var arrived sync.WaitGroup
	arrived.Add(2)
	var wg sync.WaitGroup
	results := make([]ops.BulkResult, 2)
	errs := make([]error, 2)
	for i := range 2 {
		h, err := queue.Open(path, queue.Options{BusyTimeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		wg.Go(func() {
			results[i], errs[i] = ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-3", Pace: &together{arrived: &arrived}}.Run(context.Background(), h)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Candidates != n {
			t.Fatalf("run %d listed %d candidates, want %d (both list before either redrives)", i, r.Candidates, n)
		}
	}
	both := append(slices.Clone(results[0].Redriven), results[1].Redriven...)
	if got, want := len(both), n; got != want {
		t.Fatalf("redriven %d in all, want %d", got, want)
	}
	if got, want := len(results[0].Skipped)+len(results[1].Skipped), n; got != want {
		t.Fatalf("skipped %d in all, want %d: each job is redriven by one run and skipped by the other", got, want)
	}
	checkAtomic(t, q0, all, both, "INC-3")
}

// together is a Pace whose first Wait returns only once every run sharing
// arrived has reached its own first Wait; then it lets every job go.
type together struct {
	arrived *sync.WaitGroup
	once    sync.Once
}

func (p *together) Wait(ctx context.Context) error {
	p.once.Do(func() { p.arrived.Done(); p.arrived.Wait() })
	return ctx.Err()
}

func TestBulkRedriveLimitAndDryRun(t *testing.T) {
	q, _ := opstest.Known(t)
	dry, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-4", DryRun: true}.Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dry.WouldRedrive, []string{"exh-1", "exh-2", "rd-dead"}; !slices.Equal(got, want) {
		t.Fatalf("dry run would redrive %v, want %v", got, want)
	}
	if got := collect(t, q, opstest.Now); got.Redrives != opstest.Redrives || got.Counts[queue.Dead] != opstest.Dead {
		t.Fatalf("dry run changed the queue: %d redrives, %d dead", got.Redrives, got.Counts[queue.Dead])
	}
	res, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-4", Limit: 2, Pace: noPace{}}.Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Redriven, []string{"exh-1", "exh-2"}; !slices.Equal(got, want) {
		t.Fatalf("limit 2 redrove %v, want the two oldest %v", got, want)
	}
	if got, want := history(t, q, "rd-dead").Job.State, queue.Dead; got != want {
		t.Fatalf("rd-dead: %s, want %s (over the limit)", got, want)
	}
}

func TestBulkRedriveRefusesBadInput(t *testing.T) {
	q, _ := opstest.Known(t)
	for _, c := range []struct {
		name string
		b    ops.BulkRedrive
	}{
		{"free-text note", ops.BulkRedrive{Reason: queue.ReasonPermanent, Note: "customer said no", Pace: noPace{}}},
		{"empty note", ops.BulkRedrive{Reason: queue.ReasonPermanent, Pace: noPace{}}},
		{"unknown reason", ops.BulkRedrive{Reason: "flaky", Note: "INC-5", Pace: noPace{}}},
		{"negative limit", ops.BulkRedrive{Reason: queue.ReasonPermanent, Note: "INC-5", Limit: -1, Pace: noPace{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.b.Run(context.Background(), q); !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if got, want := collect(t, q, opstest.Now).Redrives, int64(opstest.Redrives); got != want {
				t.Fatalf("redrives %d, want %d: nothing may be written", got, want)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"5/s", 5, true}, {"0.5/s", 0.5, true}, {"30/m", 0.5, true}, {"30/min", 0.5, true}, {"3600/h", 1, true},
		{"1000/s", 1000, true}, {"1001/s", 0, false}, {"5", 0, false}, {"0/s", 0, false}, {"-1/s", 0, false},
		{"5/d", 0, false}, {"x/s", 0, false}, {"NaN/s", 0, false}, {"Inf/s", 0, false}, {"", 0, false},
	} {
		got, err := ops.ParseRate(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: got %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", c.in, err)
		}
	}
}

func TestProgressRenderings(t *testing.T) {
	q, _ := opstest.NewFile(t)
	opstest.DeadBatch(t, q, "job", 3, 1000)
	var lines, bar bytes.Buffer
	t0 := time.Unix(1000, 0)
	// A job every 500 ms: the clock reads the number of lines printed so far.
	clock := func() time.Time {
		return t0.Add(time.Duration(strings.Count(lines.String(), "\n")-1) * 500 * time.Millisecond)
	}
	res, err := ops.BulkRedrive{Reason: queue.ReasonExhausted, Note: "INC-6", Pace: noPace{}, NowMs: func() int64 { return 5000 },
		Progress: multi{ops.Lines(&lines), ops.Bar(&bar, 80, clock)}}.Run(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lines.String(), "[1/3] job-000 redriven (was exhausted, token stays 1)\n[2/3] job-001 redriven (was exhausted, token stays 1)\n[3/3] job-002 redriven (was exhausted, token stays 1)\n"; got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
	out := bar.String()
	if got, want := strings.Count(out, "\r"), 3; got != want {
		t.Fatalf("bar redrawn %d times, want %d: %q", got, want, out)
	}
	if !strings.HasSuffix(out, "[##########################] 3/3  redriven 3  skipped 0  2.0/s  ETA 0s  job-002\n") {
		t.Fatalf("bar ends %q", out)
	}
	var sum bytes.Buffer
	if err := ops.WriteBulkSummary(&sum, res, 5); err != nil {
		t.Fatal(err)
	}
	if got, want := sum.String(), "redrove 3 of 3 dead (exhausted) jobs under INC-6; skipped 0 no longer dead\n"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}

// The bar shows the rate so far and the time left at it, and fits the
// terminal: no line reaches the last column, whatever the width.
func TestBarRateAndWidth(t *testing.T) {
	for _, tc := range []struct {
		columns int
		want    string // the last line drawn
	}{
		{120, "[#####...................................] 5/40  redriven 4  skipped 1  2.0/s  ETA 18s  order-2026-000005"},
		{80, "[#.............] 5/40  redriven 4  skipped 1  2.0/s  ETA 18s  order-2026-000005"},
		{60, "[#............] 5/40  redriven 4  skipped 1  2.0/s  ETA 18s"},                    // the id goes before the bar shrinks below 10
		{40, "[#.........] 5/40  redriven 4  skipped "},                                        // then the line is cut
		{0, "[#.............] 5/40  redriven 4  skipped 1  2.0/s  ETA 18s  order-2026-000005"}, // unknown: 80
	} {
		t.Run(strconv.Itoa(tc.columns), func(t *testing.T) {
			var buf bytes.Buffer
			now := time.Unix(1000, 0)
			b := ops.Bar(&buf, tc.columns, func() time.Time { return now })
			for i := 1; i <= 5; i++ {
				action := "redriven"
				if i == 3 {
					action = "skipped"
				}
				b.Step(ops.Step{N: i, Total: 40, ID: fmt.Sprintf("order-2026-%06d", i), Action: action})
				now = now.Add(500 * time.Millisecond)
			}
			now = now.Add(-500 * time.Millisecond) // the last step's clock
			draws := strings.Split(buf.String(), "\r\x1b[K")[1:]
			last := draws[len(draws)-1]
			if last != tc.want {
				t.Errorf("columns %d: last line\n got %q\nwant %q", tc.columns, last, tc.want)
			}
			width := tc.columns
			if width == 0 {
				width = ops.DefaultColumns
			}
			for _, d := range draws {
				if len(d) > width-1 {
					t.Errorf("columns %d: a line of %d characters would wrap: %q", tc.columns, len(d), d)
				}
			}
			if !strings.Contains(draws[0], "-/s  ETA -") && tc.columns >= 60 {
				t.Errorf("the first line cannot know the rate yet: %q", draws[0])
			}
		})
	}
}

type multi []ops.Progress

func (m multi) Step(s ops.Step) {
	for _, p := range m {
		p.Step(s)
	}
}

func (m multi) End(r ops.BulkResult) {
	for _, p := range m {
		p.End(r)
	}
}
