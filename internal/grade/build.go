package grade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"snacklab/labsteps/harness"
)

// Programs are the packages a module submission must build.
var Programs = []string{"./cmd/queuectl", "./cmd/sender", "./cmd/receiver"}

// buildEnv is the environment of a submission's build: static, offline,
// go.mod and go.sum as submitted, the local toolchain, no workspace.
func (g *grader) buildEnv() []string {
	env := []string{"CGO_ENABLED=0", "GOFLAGS=-mod=readonly -buildvcs=false", "GOPROXY=off", "GOSUMDB=off",
		"GOTOOLCHAIN=local", "GOWORK=off"}
	if g.cfg.GoCache != "" {
		env = append(env, "GOCACHE="+g.cfg.GoCache)
	}
	return append(os.Environ(), env...)
}

// build runs `go build -o bin/ ./cmd/queuectl ./cmd/sender ./cmd/receiver`
// in module dir with a time limit, on this machine (the unisolated mode),
// killing the whole build (compilers included) when it runs out. On failure
// it returns the trimmed output.
//
// The first module build of a run goes alone (buildModule): every other
// build of the cohort waits for it, so that with a cold cache the shared
// dependencies (the SQLite driver is most of the work) are compiled once,
// not once per job.
func (g *grader) build(ctx context.Context, dir, bin string) (string, error) {
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	limit := g.buildLimit()
	bctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	args := append([]string{"build", "-trimpath", "-o", bin + string(os.PathSeparator)}, Programs...)
	cmd := exec.CommandContext(bctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = g.buildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // compilers a failed go left behind
	}
	text := trimBuildOutput(out.String())
	switch {
	case err == nil:
		return "", nil
	case ctx.Err() != nil:
		return text, ctx.Err()
	case errors.Is(bctx.Err(), context.DeadlineExceeded):
		return text, fmt.Errorf("go build did not finish within %v: %w", limit, ErrBuildLimit)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return text, fmt.Errorf("go build %s: %v", strings.Join(Programs, " "), ee.ProcessState)
	}
	return text, fmt.Errorf("go build: %w", err)
}

// ErrBuildLimit says a build ran out of the time limit the grader set: the
// grader's trouble (a loaded machine, a cold cache), not the submission's,
// so the submission is not graded rather than scored 0.
var ErrBuildLimit = errors.New("the build ran out of the grader's time limit")

// Build limits derived from the machine (Config.BuildTimeout 0): the base
// on a quiet machine, scaled by the load per core when the build starts.
const (
	baseBuildLimit = 5 * time.Minute
	maxBuildScale  = 10
)

// buildLimit is the time limit of a build starting now (BuildLimit).
func (g *grader) buildLimit() time.Duration { return BuildLimit(g.cfg.BuildTimeout) }

// BuildLimit is the time limit of a build starting now: given when it is
// above 0, else baseBuildLimit scaled by the load per core (1 to 10).
func BuildLimit(given time.Duration) time.Duration {
	if given > 0 {
		return given
	}
	return time.Duration(float64(baseBuildLimit) * min(max(1, harness.LoadPerCore()), maxBuildScale)).Round(time.Second)
}

// trimBuildOutput keeps the first 60 lines and 8 KiB of a build's output.
func trimBuildOutput(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "�"))
	lines := strings.Split(s, "\n")
	cut := len(lines) > 60
	if cut {
		lines = lines[:60]
	}
	s = strings.Join(lines, "\n")
	if len(s) > 8<<10 {
		s, cut = strings.ToValidUTF8(s[:8<<10], ""), true
	}
	if cut {
		s += "\n… (trimmed)"
	}
	return s
}

// firstError is the first line of a build's output that is not a package
// header ("# snacklab/cmd/queuectl"), else err.
func firstError(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return err.Error()
}

// buildModule checks a module's source tree, then builds it inside the
// boundary, or on this machine in the unisolated mode. failure is the
// submission's problem, err the grader's.
func (g *grader) buildModule(ctx context.Context, src, bin string) (out, failure string, err error) {
	if err := CheckSource(src); err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrSource.Error()+": ")
		return msg, "the build was refused: " + msg, nil
	}
	warmed, err := g.waitWarm(ctx)
	if err != nil {
		return "", "", err
	}
	defer warmed()
	if b := g.cfg.Boundary; b != nil && b.Build != nil {
		out, failure, err := b.Build(ctx, src, bin, g.buildLimit())
		if failure != "" {
			failure = "the build failed: " + firstError(out, errors.New(failure))
		}
		return trimBuildOutput(g.student(out, src)), failure, err
	}
	out, err = g.build(ctx, src, bin)
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	if errors.Is(err, ErrBuildLimit) {
		return g.student(out, src), "", err
	}
	if err != nil {
		return g.student(out, src), "the build failed: " + g.student(firstError(out, err), src), nil
	}
	return "", "", nil
}

// waitWarm returns once the build cache is warm. Isolated, the first
// caller runs the boundary's trusted warming build and the others wait for
// it; no submission's build waits for another's. Unisolated (--trusted,
// code the teacher trusts), the first submission's build warms the cache
// and the others wait for it, as they share the host's cache and would
// otherwise compile the same dependencies side by side. The caller calls
// warmed once its own build is done.
func (g *grader) waitWarm(ctx context.Context) (warmed func(), err error) {
	nothing := func() {}
	b := g.cfg.Boundary
	if b != nil && b.Warm == nil {
		return nothing, nil
	}
	if g.first.CompareAndSwap(false, true) {
		if b == nil {
			return func() { close(g.warm) }, nil
		}
		t0 := time.Now()
		g.logf("warming the shared build cache: one trusted build of the reference's dependencies before any submission's (minutes on a cold cache)…\n")
		err := b.Warm(ctx)
		if err == nil {
			g.logf("build cache warm after %v\n", time.Since(t0).Round(time.Millisecond))
		}
		close(g.warm)
		if err != nil && ctx.Err() == nil {
			// A cold cache is slower, not wrong: every build still runs
			// within its own limit.
			g.logf("warming the build cache failed after %v (the builds start cold): %v\n", time.Since(t0).Round(time.Millisecond), err)
		}
		return nothing, ctx.Err()
	}
	select {
	case <-g.warm:
		return nothing, nil
	case <-ctx.Done():
		return nothing, ctx.Err()
	}
}
