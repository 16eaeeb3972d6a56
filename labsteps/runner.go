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
	Bin         string        // directory with queuectl, sender, receiver
	WorkRoot    string        // parent of the steps' work dirs; "" is the system temp dir
	Keep        bool          // keep work dirs of passing steps too
	StepTimeout time.Duration // per step; 0 is 60s
	Parallel    int           // steps run at once; 0 is all of them
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
	timeout := cfg.StepTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var dir string
	bin, err := filepath.Abs(cfg.Bin)
	if err == nil {
		err = CheckBin(bin)
	}
	if err == nil {
		dir, err = os.MkdirTemp(cfg.WorkRoot, fmt.Sprintf("snacklab-step%d-*", s.Num))
	}
	if err != nil {
		res.Problem = err.Error()
		return res
	}
	h := newHarness(ctx, dir, bin)
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
