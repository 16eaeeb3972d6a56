package labsteps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Calibration is how long the implementation under test takes to start and
// answer on this machine, measured just before the steps run. Every wait of
// the lab is derived from it (see Limits), so that a correct implementation
// in a slow language on a busy grader is given the time it needs, and a
// fixed wait never turns a busy machine into a wrong grade.
type Calibration struct {
	// Start is the median time of `queuectl backoff` (CONTRACT §1): a
	// process that starts, computes one answer and exits, with no file.
	Start time.Duration `json:"start_ns"`
	// Listen is the median time from starting the receiver to its
	// `listening on` line (CONTRACT §5); 0 when it never announced itself.
	Listen time.Duration `json:"listen_ns"`
	// Load is the 1-minute load average per core when it was measured.
	Load    float64       `json:"load_per_core"`
	Cores   int           `json:"cores"`
	Samples int           `json:"samples"` // runs of each measurement
	Took    time.Duration `json:"took_ns"` // the calibration's own cost
	Note    string        `json:"note,omitempty"`
}

// Unit is one "start and answer" of this implementation: the slower of its
// two measurements.
func (c Calibration) Unit() time.Duration { return max(c.Start, c.Listen) }

// String is the calibration in one line, for the console and reports.
func (c Calibration) String() string {
	start, listen := "queuectl was not timed", "the receiver was not timed"
	if c.Start > 0 {
		start = fmt.Sprintf("queuectl starts and answers in %.1fms", ms(c.Start))
	}
	if c.Listen > 0 {
		listen = fmt.Sprintf("the receiver listens after %.1fms", ms(c.Listen))
	}
	s := fmt.Sprintf("%s, %s (medians of %d); load %.2f per core on %d cores", start, listen, c.Samples, c.Load, c.Cores)
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// Limits are the waits of one step. Each is the larger of a floor (the fixed
// value the lab used before calibration, scaled by the machine's load) and a
// number of calibrated starts: a wait for a line, an exit or an answer
// allows 40 of this implementation's starts, a whole step 400.
type Limits struct {
	// Wait bounds every single wait for a line, an exit, a state or an
	// HTTP answer (Harness.WaitLimit).
	Wait time.Duration `json:"wait_ns"`
	// Block is what a step may allow WaitBlocked to see processes asleep
	// on the held write lock.
	Block time.Duration `json:"block_ns"`
	// Drain bounds reading the rest of a process's stdout and stderr once
	// it has ended; output still open then is never judged.
	Drain time.Duration `json:"drain_ns"`
	// Step is the time limit of the whole step.
	Step time.Duration `json:"step_ns"`
	// Scale is the load factor the floors were multiplied by (1 to 10).
	Scale float64 `json:"scale"`
	// Fixed says the step limit was given (--timeout), not derived.
	Fixed bool `json:"fixed,omitempty"`
	// From is the calibration the limits were derived from.
	From Calibration `json:"calibration"`
}

// Floors and factors of the derivation (see Limits).
const (
	minWait, waitStarts   = 10 * time.Second, 40
	minBlock, blockStarts = 3 * time.Second, 10
	minDrain, drainStarts = 5 * time.Second, 20
	minStep, stepStarts   = 60 * time.Second, 400
	maxLoadScale          = 10
)

// DeriveLimits turns a calibration into one step's limits, scaling the
// floors by the machine's load (the larger of the load at calibration and
// load, the load per core now). stepTimeout > 0 fixes the step limit.
func DeriveLimits(c Calibration, load float64, stepTimeout time.Duration) Limits {
	scale := min(max(1, c.Load, load), maxLoadScale)
	unit := c.Unit()
	derive := func(floor time.Duration, starts int) time.Duration {
		return max(time.Duration(float64(floor)*scale), time.Duration(starts)*unit).Round(time.Millisecond)
	}
	l := Limits{Wait: derive(minWait, waitStarts), Block: derive(minBlock, blockStarts), Drain: derive(minDrain, drainStarts),
		Step: derive(minStep, stepStarts), Scale: scale, From: c}
	if stepTimeout > 0 {
		l.Step, l.Fixed = stepTimeout, true
	}
	return l
}

// String says the limits and where they come from, briefly, for a
// timed-out check.
func (l Limits) String() string {
	how := "derived"
	if l.Fixed {
		how = "given by --timeout"
	}
	return fmt.Sprintf("each wait %v, step limit %v (%s); calibrated: queuectl %.1fms, receiver %.1fms, load %.2f per core (floors ×%.1f)",
		l.Wait, l.Step, how, ms(l.From.Start), ms(l.From.Listen), l.From.Load, l.Scale)
}

// LoadPerCore is the 1-minute load average divided by the cores (0 when
// /proc/loadavg cannot be read).
func LoadPerCore() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return l / float64(runtime.NumCPU())
}

// calibrationSamples is how many times each measurement runs.
const calibrationSamples = 3

// Calibrate measures the implementation in bin now: the median time of
// `queuectl backoff` and of the receiver's `listening on` handshake, one
// process at a time. Each probe is bounded (5 s scaled by the load): an
// implementation that hangs or never announces itself is not timed, the
// limits fall back to their floors, and the note says what could not be
// measured (the steps will say what is wrong with it). It fails only when a
// program cannot be started at all, or ctx ends.
func Calibrate(ctx context.Context, bin, workRoot string) (c Calibration, err error) {
	t0 := time.Now()
	c = Calibration{Samples: calibrationSamples, Cores: runtime.NumCPU(), Load: LoadPerCore()}
	defer func() { c.Took = time.Since(t0) }()
	dir, err := os.MkdirTemp(workRoot, "snacklab-calibrate-*")
	if err != nil {
		return c, err
	}
	defer os.RemoveAll(dir)
	probe := time.Duration(float64(minDrain) * min(max(1, c.Load), maxLoadScale))
	var notes []string
	defer func() { c.Note = strings.Join(notes, "; ") }()

	var starts []time.Duration
	for range calibrationSamples {
		d, err := timeRun(ctx, dir, probe, filepath.Join(bin, "queuectl"), "backoff", "--id", "o-1", "--attempt", "1")
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		if errors.Is(err, errProbeLimit) {
			notes = append(notes, fmt.Sprintf("queuectl backoff did not end within %v: not timed", probe))
			starts = nil
			break
		}
		if err != nil {
			return c, fmt.Errorf("calibrate: queuectl backoff: %w", err)
		}
		starts = append(starts, d)
	}
	if len(starts) > 0 {
		c.Start = medianDur(starts)
	}

	// A receiver that has not announced itself by then is not waited for
	// again: its time is unknown, and the steps will say why.
	bound := max(probe, drainStarts*c.Start)
	var listens []time.Duration
	for i := range calibrationSamples {
		d, err := timeListen(ctx, filepath.Join(bin, "receiver"), filepath.Join(dir, "receiver-"+strconv.Itoa(i)+".db"), bound)
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		if err != nil {
			notes = append(notes, err.Error())
			break
		}
		listens = append(listens, d)
	}
	if len(listens) > 0 {
		c.Listen = medianDur(listens)
	}
	return c, nil
}

// Calibrate measures cfg.Bin for a run of cfg, within its step time limit
// when one is given, and folds a failure into the note: the steps then run
// with the floors and say themselves what is wrong.
func (cfg Config) Calibrate(ctx context.Context) Calibration {
	if cfg.StepTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.StepTimeout)
		defer cancel()
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return Calibration{Note: err.Error()}
	}
	c, err := Calibrate(ctx, bin, cfg.WorkRoot)
	if err != nil {
		c.Note = strings.TrimPrefix(c.Note+"; calibration stopped: "+err.Error(), "; ")
	}
	return c
}

// errProbeLimit is a calibration probe that did not end within its bound.
var errProbeLimit = errors.New("probe limit reached")

// timeRun times one run of path with args, its output discarded, killing it
// and anything it started at limit.
func timeRun(ctx context.Context, dir string, limit time.Duration, path string, args ...string) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(pctx, path, args...)
	cmd.Dir = dir // stdout and stderr are /dev/null: nothing to copy, nothing to wait for
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if pctx.Err() != nil && ctx.Err() == nil {
		return d, errProbeLimit
	}
	if err != nil && cmd.ProcessState == nil {
		return d, err
	}
	return d, nil // an exit code other than 0 is still an answer, and timed
}

// timeListen starts a receiver and times its first line, which must be
// `listening on ADDR`; the receiver and anything it started are then killed.
func timeListen(ctx context.Context, path, db string, bound time.Duration) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, path, "--db", db, "--addr", "127.0.0.1:0")
	cmd.Dir = filepath.Dir(db)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd.Stdout = w
	t := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, fmt.Errorf("calibrate: receiver: %w", err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Scan()
		line <- sc.Text()
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "listening on ") {
			return 0, fmt.Errorf("the receiver's first line was %q, not `listening on ADDR`: waits derive from queuectl alone", trim(l))
		}
		return time.Since(t), nil
	case <-timer.C:
		return 0, fmt.Errorf("the receiver did not announce `listening on` within %v: waits derive from queuectl alone", bound)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
