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
	bctx, cancel := context.WithTimeout(ctx, g.cfg.BuildTimeout)
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
		return text, fmt.Errorf("go build did not finish within %v", g.cfg.BuildTimeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return text, fmt.Errorf("go build %s: %v", strings.Join(Programs, " "), ee.ProcessState)
	}
	return text, fmt.Errorf("go build: %w", err)
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
