package harness

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

	"snacklab/labsteps/result"
)

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
func Calibrate(ctx context.Context, bin, workRoot string) (c result.Calibration, err error) {
	return CalibrateAs(ctx, bin, workRoot, nil)
}

// CalibrateAs is Calibrate with the programs run as j (nil: as the lab), in
// a directory handed to j.
func CalibrateAs(ctx context.Context, bin, workRoot string, j *Judged) (c result.Calibration, err error) {
	t0 := time.Now()
	c = result.Calibration{Samples: calibrationSamples, Cores: runtime.NumCPU(), Load: LoadPerCore()}
	defer func() { c.Took = time.Since(t0) }()
	dir, err := os.MkdirTemp(workRoot, "snacklab-calibrate-*")
	if err != nil {
		return c, err
	}
	defer os.RemoveAll(dir)
	if err := j.Own(dir); err != nil {
		return c, err
	}
	// Each probe is bounded by the drain floor scaled by the load.
	probe := result.DeriveLimits(result.Calibration{Load: c.Load}, 0, 0).Drain
	var notes []string
	defer func() { c.Note = strings.Join(notes, "; ") }()

	var starts []time.Duration
	for range calibrationSamples {
		d, err := timeRun(ctx, j, dir, probe, filepath.Join(bin, "queuectl"), "backoff", "--id", "o-1", "--attempt", "1")
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
	// again: its time is unknown, and the steps will say why. The bound is
	// the drain limit derived from the start just measured.
	bound := result.DeriveLimits(result.Calibration{Load: c.Load, Start: c.Start}, 0, 0).Drain
	var listens []time.Duration
	for i := range calibrationSamples {
		d, err := timeListen(ctx, j, filepath.Join(bin, "receiver"), filepath.Join(dir, "receiver-"+strconv.Itoa(i)+".db"), bound)
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

// errProbeLimit is a calibration probe that did not end within its bound.
var errProbeLimit = errors.New("probe limit reached")

// timeRun times one run of path with args, its output discarded, killing it
// and anything it started at limit.
func timeRun(ctx context.Context, j *Judged, dir string, limit time.Duration, path string, args ...string) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(pctx, path, args...)
	cmd.Dir = dir // stdout and stderr are /dev/null: nothing to copy, nothing to wait for
	cmd.SysProcAttr, cmd.Env = j.ProcAttr(), j.Env()
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
func timeListen(ctx context.Context, j *Judged, path, db string, bound time.Duration) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, path, "--db", db, "--addr", "127.0.0.1:0")
	cmd.Dir = filepath.Dir(db)
	cmd.SysProcAttr, cmd.Env = j.ProcAttr(), j.Env()
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
			return 0, fmt.Errorf("the receiver's first line was %q, not `listening on ADDR`: waits derive from queuectl alone", Trim(l))
		}
		return time.Since(t), nil
	case <-timer.C:
		return 0, fmt.Errorf("the receiver did not announce `listening on` within %v: waits derive from queuectl alone", bound)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
