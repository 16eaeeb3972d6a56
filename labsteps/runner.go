package labsteps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// Step is one numbered lab step: what a result says about it, and the
// story it runs.
type Step struct {
	result.Step
	run func(h *harness.Harness)
}

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
	Calibration *result.Calibration
	// Limits, when set, are used as they are instead of derived ones (the
	// harness's own tests use short ones).
	Limits *result.Limits
	// Judged, when set, is the identity the programs under test run as
	// (lab run --judged-uid, in a grading container): calibration's
	// programs as Judged, step n's as Judged.ForStep(n), its uid and gid
	// plus n. The lab keeps its logs and traces where they cannot write
	// (harness.Judged).
	Judged *harness.Judged
	// StopAt, when set, ends a step at its first failed check for which it
	// holds (harness.StopAt): the self-test needs one rejection on a
	// mutant's clause of a step, not the rest of it. Grading never sets it.
	StopAt func(result.Check) bool
}

// RunSteps runs steps, at most cfg.Parallel at once, and hands each result to
// report in step order as soon as it and every step before it are done.
func RunSteps(ctx context.Context, cfg Config, steps []Step, report func(result.Result)) []result.Result {
	n := cfg.Parallel
	if n <= 0 || n > len(steps) {
		n = len(steps)
	}
	results := make([]result.Result, len(steps))
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
func RunStep(ctx context.Context, cfg Config, s Step) (res result.Result) {
	t0 := time.Now()
	res = result.Result{Step: s.Step}
	defer func() { res.Took = time.Since(t0) }()
	parent := ctx // canceled only by whoever started the run: an interrupt
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
	var cal result.Calibration
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
		res.Limits = result.DeriveLimits(cal, harness.LoadPerCore(), cfg.StepTimeout)
	}
	timeout := res.Limits.Step
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, stop := context.WithCancel(ctx) // StopAt's
	defer stop()
	dir, err := os.MkdirTemp(cfg.WorkRoot, fmt.Sprintf("snacklab-step%d-*", s.Num))
	if err != nil {
		res.Problem = err.Error()
		return res
	}
	judged := cfg.Judged.ForStep(s.Num)
	h, err := harness.NewStep(ctx, dir, bin, res.Limits, judged)
	if err != nil {
		os.RemoveAll(dir)
		res.Problem = "the step's directories: " + err.Error()
		return res
	}
	if cfg.StopAt != nil {
		h.StopAt(cfg.StopAt, stop)
	}
	h.Narrate("step %d: %s", s.Num, s.Title)
	res.Problem = h.Do(s.run)
	if res.Problem != "" {
		res.NotJudged = result.Error // the step's own code went wrong, not the implementation
	}
	// Do ended the process groups the step started; a program that left
	// its group (setsid) is ended here, with every other of the step's
	// identity, before the step's files are kept or removed.
	if err := judged.KillAll(); err != nil && res.Problem == "" {
		res.Problem = "end the step's programs: " + err.Error()
		// A helper the step's own programs stopped is their failure, with
		// the reason; any other error is the lab's, and judges nothing.
		if !errors.Is(err, harness.ErrJudgedStall) {
			res.NotJudged = result.Error
		}
	}
	h.Record(&res)
	res.Pass = res.Problem == "" && res.Failed() == nil && len(res.Checks) > 0
	if res.Problem == "" && len(res.Checks) == 0 {
		res.Problem = "the step made no checks"
	}
	if ctx.Err() != nil && !res.Pass && res.Problem == "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.Problem = fmt.Sprintf("time limit of %v reached", timeout)
		res.TimedOut = true
	}
	if !res.Pass && errors.Is(parent.Err(), context.Canceled) {
		res.NotJudged = result.Interrupted
		if res.Problem == "" {
			res.Problem = "the run was interrupted before the step ended"
		}
	}
	// TIMEOUT only when every failure was a wait running out: a wrong
	// answer in one part is a FAIL whatever another part waited for.
	if fails := res.Failures(); len(fails) > 0 && !slices.ContainsFunc(fails, func(c result.Check) bool { return !c.TimedOut }) {
		res.TimedOut = true
	}
	res.Dir, res.LogDir = dir, h.LogDir
	if (res.Pass || res.NotJudged == result.Interrupted) && !cfg.Keep {
		// An interrupted step's files show nothing worth keeping: the
		// run was stopped, not judged.
		os.RemoveAll(dir)
		res.Dir, res.LogDir = "", ""
	} else if err := h.WriteLogs(); err != nil && res.Problem == "" {
		res.Problem = "write logs: " + err.Error()
	}
	return res
}

// Calibrate measures cfg.Bin for a run of cfg, within its step time limit
// when one is given, and folds a failure into the note: the steps then run
// with the floors and say themselves what is wrong.
func (cfg Config) Calibrate(ctx context.Context) result.Calibration {
	if cfg.StepTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.StepTimeout)
		defer cancel()
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return result.Calibration{Note: err.Error()}
	}
	c, err := harness.CalibrateAs(ctx, bin, cfg.WorkRoot, cfg.Judged)
	err = errors.Join(err, cfg.Judged.KillAll())
	if err != nil {
		c.Note = strings.TrimPrefix(c.Note+"; calibration stopped: "+err.Error(), "; ")
	}
	return c
}
