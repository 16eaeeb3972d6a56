package labsteps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Step is one numbered lab step.
type Step struct {
	Num   int
	Slug  string // short name: retry, durable, claim…
	Title string // what a learner reads in the PASS/FAIL line
	// Checks says in one paragraph what the step checks; Why says why it matters.
	Checks string
	Why    string
	run    func(h *Harness)
}

// Name is "3 claim".
func (s Step) Name() string { return strconv.Itoa(s.Num) + " " + s.Slug }

// Steps lists the eight steps in order.
func Steps() []Step {
	return []Step{step1, step2, step3, step4, step5, step6, step7, step8}
}

// Programs are the executables an implementation provides (CONTRACT.md).
var Programs = []string{"queuectl", "sender", "receiver"}

// CheckBin reports a missing or non-executable program in dir.
func CheckBin(dir string) error {
	for _, p := range Programs {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			return fmt.Errorf("%s: %w (build it, or point --bin at a directory holding queuectl, sender and receiver)", p, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s in %s is not an executable file", p, dir)
		}
	}
	return nil
}

// Select picks steps by arguments like "8", "crash", "3-5", "1,4"; none
// means all (select.go).
func Select(args []string) ([]Step, error) { return selectSteps(args) }

// Config says what to run the steps against and where.
type Config struct {
	Bin      string // directory with queuectl, sender, receiver
	WorkRoot string // parent of the steps' work dirs; "" is the system temp dir
	Keep     bool   // keep work dirs of passing steps too
	// StepTimeout is the time limit of one step; 0 derives it from the
	// calibration (at least 60s, more for a slow implementation or a busy
	// machine; see Limits).
	StepTimeout time.Duration
	Parallel    int // steps run at once; 0 is all of them
	// Calibration is the implementation's measured start and answer times
	// that every wait is derived from. Nil: RunSteps measures it once for
	// the run, and RunStep called alone measures it for its step.
	Calibration *Calibration
	// Limits, when set, are used as they are instead of derived ones (the
	// harness's own tests use short ones).
	Limits *Limits
}

// Result is what one step found.
type Result struct {
	Step      Step
	Pass      bool
	Took      time.Duration
	Checks    []Check
	Events    []Event
	Narrative string
	Dir       string // the work dir; "" once removed (a passing step without Keep)
	LogDir    string
	Problem   string        // the harness itself went wrong (a panic, a missing dir)
	Procs     int           // processes the step started
	Commits   int           // commits they made, counted from what they printed
	Waits     time.Duration // time spent waiting for the real clock
	// TimedOut says the step failed because a wait ran out (a process still
	// running, output still open, the step's time limit), not because of a
	// wrong answer: on a busy machine, re-run before believing it.
	TimedOut bool
	// Limits are the waits the step ran with, and the calibration they
	// were derived from.
	Limits Limits
}

// Verdict is PASS, FAIL (a wrong answer, or the harness went wrong) or
// TIMEOUT (a wait ran out: see TimedOut).
func (r Result) Verdict() string {
	switch {
	case r.Pass:
		return "PASS"
	case r.TimedOut:
		return "TIMEOUT"
	}
	return "FAIL"
}

// Failed is the check that failed the step, or nil.
func (r Result) Failed() *Check {
	for i := range r.Checks {
		if !r.Checks[i].OK {
			return &r.Checks[i]
		}
	}
	return nil
}

// RunSteps runs steps, at most cfg.Parallel at once, and hands each result to
// report in step order as soon as it and every step before it are done.
func RunSteps(ctx context.Context, cfg Config, steps []Step, report func(Result)) []Result {
	n := cfg.Parallel
	if n <= 0 || n > len(steps) {
		n = len(steps)
	}
	results := make([]Result, len(steps))
	done := make([]chan struct{}, len(steps))
	for i := range done {
		done[i] = make(chan struct{})
	}
	if cfg.Calibration == nil && cfg.Limits == nil && len(steps) > 0 && CheckBin(cfg.Bin) == nil {
		cal := cfg.Calibrate(ctx)
		cfg.Calibration = &cal
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			results[i] = RunStep(ctx, cfg, s)
			<-sem
			close(done[i])
		}()
	}
	for i := range steps {
		<-done[i]
		if report != nil {
			report(results[i])
		}
	}
	wg.Wait()
	return results
}

// RunStep runs one step in a fresh work dir and cleans up after it.
func RunStep(ctx context.Context, cfg Config, s Step) (res Result) {
	t0 := time.Now()
	res = Result{Step: s}
	defer func() { res.Took = time.Since(t0) }()
	bin, err := filepath.Abs(cfg.Bin)
	if err == nil {
		err = CheckBin(bin)
	}
	if err != nil {
		res.Problem = err.Error()
		return res
	}
	// A given time limit counts from the start, calibration included (a
	// grader may stop the whole step at that limit); a derived one counts
	// from the calibration it is derived from.
	if cfg.StepTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.StepTimeout)
		defer cancel()
	}
	var cal Calibration
	switch {
	case cfg.Limits != nil:
		res.Limits = *cfg.Limits
	case cfg.Calibration != nil:
		cal = *cfg.Calibration
	default:
		cal = cfg.Calibrate(ctx)
	}
	if cfg.Limits == nil {
		// The run's calibration, with the floors scaled by the load now.
		res.Limits = DeriveLimits(cal, LoadPerCore(), cfg.StepTimeout)
	}
	timeout := res.Limits.Step
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dir, err := os.MkdirTemp(cfg.WorkRoot, fmt.Sprintf("snacklab-step%d-*", s.Num))
	if err != nil {
		res.Problem = err.Error()
		return res
	}
	h := newHarness(ctx, dir, bin)
	h.setLimits(res.Limits)
	h.Narrate("step %d: %s", s.Num, s.Title)
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stepFailed); !ok {
					res.Problem = fmt.Sprintf("lab harness panic: %v\n%s", r, debug.Stack())
				}
			}
		}()
		s.run(h)
	}()
	h.cleanup()
	h.mu.Lock()
	res.Checks = append([]Check(nil), h.checks...)
	res.Events = append([]Event(nil), h.events...)
	// In time order within each section, sections in the order the step
	// declared them (parts run by Parallel overlap in time).
	secIdx := map[string]int{}
	for _, e := range res.Events {
		if _, ok := secIdx[e.Section]; !ok {
			secIdx[e.Section] = len(secIdx)
		}
	}
	sort.SliceStable(res.Events, func(i, j int) bool {
		a, b := res.Events[i], res.Events[j]
		if secIdx[a.Section] != secIdx[b.Section] {
			return secIdx[a.Section] < secIdx[b.Section]
		}
		return a.At < b.At
	})
	res.Narrative = h.narr.String()
	res.Procs, res.Commits, res.Waits = h.nproc, int(h.commits.Load()), h.waited
	h.mu.Unlock()
	res.Pass = res.Problem == "" && res.Failed() == nil && len(res.Checks) > 0
	if res.Problem == "" && len(res.Checks) == 0 {
		res.Problem = "the step made no checks"
	}
	if ctx.Err() != nil && !res.Pass && res.Problem == "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Problem = fmt.Sprintf("time limit of %v reached", timeout)
		res.TimedOut = true
	}
	if c := res.Failed(); c != nil && c.TimedOut {
		res.TimedOut = true
	}
	res.Dir, res.LogDir = dir, h.LogDir
	if res.Pass && !cfg.Keep {
		os.RemoveAll(dir)
		res.Dir, res.LogDir = "", ""
	} else {
		err := errors.Join(h.writeLogs(), os.WriteFile(filepath.Join(dir, "lab.log"), []byte(res.Narrative), 0o644))
		if err != nil && res.Problem == "" {
			res.Problem = "write logs: " + err.Error()
		}
	}
	return res
}

// countTimedOut counts the results that timed out.
func countTimedOut(rs []Result) int {
	n := 0
	for _, r := range rs {
		if r.TimedOut {
			n++
		}
	}
	return n
}
