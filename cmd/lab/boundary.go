package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"snacklab/containers"
	"snacklab/internal/grade"
	"snacklab/internal/isolate"
	"snacklab/labsteps/result"
)

// The boundaries lab grade builds and runs submissions in: Docker's
// containers (the default) or the pod it runs in (--isolate pod), each
// with the static lab they need.

// isolatedBoundary connects to the Docker engine and makes the boundary a
// cohort is built and graded in. The lab binary put in the grading image
// must be static: when this one is not (built with cgo, as `go build` does
// where gcc is present), a static copy is built from the module in the
// current directory, or the error says the exact command.
func isolatedBoundary(ctx context.Context, exe string, o gradeOptions, steps int, stdout io.Writer) (*grade.Boundary, func(), error) {
	lab, cleanup, err := staticLab(ctx, exe, stdout)
	if err != nil {
		return nil, nil, err
	}
	eng, err := isolate.New(ctx, lab)
	cleanup()
	if errors.Is(err, isolate.ErrNoEngine) {
		return nil, nil, fmt.Errorf("grade: isolating the submissions needs a Docker engine (%w); start one, or, only for code you trust, grade with --trusted", err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("grade: %w", err)
	}
	lim := isolate.Limits{Memory: o.memory << 20, PIDs: o.pids, CPUs: o.cpus, Wall: o.wall}
	gocache := o.gocache
	if gocache == "" {
		if gocache, err = isolate.DefaultGoCache(); err != nil {
			eng.Close()
			return nil, nil, err
		}
	}
	wall := o.wall
	if wall == 0 {
		par := o.parallel
		if par <= 0 || par > steps {
			par = steps
		}
		step := o.timeout
		if step == 0 {
			step = result.MaxStep // each step derives its limit, at most this
		}
		wall = time.Duration((steps+par-1)/par)*step + isolate.WallGrace
	}
	crashLim := isolate.Limits{Memory: lim.Memory, PIDs: lim.PIDs, CPUs: lim.CPUs}
	b := &grade.Boundary{
		Mode: fmt.Sprintf("isolated in Docker: built and run in containers with no network, a root only the lab may write, the lab as root with six capabilities and the submission's programs as uid %d and up apart from it; %d MiB, %g CPU, %d pids, %v wall clock per submission",
			isolate.JudgedUID, o.memory, o.cpus, o.pids, wall),
		Build: eng.BuildFunc(gocache, isolate.Limits{Memory: o.buildMemory << 20}),
		Run:   grade.StepRunner(eng.Runner(lim)),
		// lab crash in the same containers, with its own wall-clock limit.
		Crash:    eng.CrashRunner(crashLim),
		PowerCut: eng.PowerCutRunner(crashLim),
	}
	// The reference's dependencies warm the shared build cache first, in a
	// build container of their own, so no submission's build waits on a
	// classmate's (a hanging one would hold them all for its limit). Away
	// from the snacklab module the builds start cold, side by side.
	if root, err := moduleRoot(""); err == nil {
		b.Warm = eng.WarmFunc(root, gocache, isolate.Limits{Memory: o.buildMemory << 20}, grade.BuildLimit(o.buildTimeout))
	}
	return b, func() { eng.Close() }, nil
}

// podBoundary makes the boundary of --isolate pod: the pod is the
// boundary someone else made, and inside it the judge and the judged are
// separated as in a grading container (isolate.NewLocal). Builds run here
// as the judge (no submission code runs during a build); every
// submission's steps and crash runs are a lab process of their own whose
// programs run as other uids.
func podBoundary(ctx context.Context, exe string, o gradeOptions, stdout io.Writer) (*grade.Boundary, func(), error) {
	lab, cleanup, err := staticLab(ctx, exe, stdout)
	if err != nil {
		return nil, nil, err
	}
	eng, err := isolate.NewLocal(ctx, lab)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("grade: --isolate pod: %w", err)
	}
	lim := isolate.Limits{Wall: o.wall}
	b := &grade.Boundary{
		Mode: "isolated in a pod: built in the pod, each submission's lab run as root with six capabilities and its programs as other uids (200000 and up) apart from it; the pod's network, file system and limits",
		Run:  grade.StepRunner(eng.Runner(lim)),
		// lab crash likewise.
		Crash:    eng.CrashRunner(isolate.Limits{}),
		PowerCut: eng.PowerCutRunner(isolate.Limits{}),
	}
	return b, func() { eng.Close(); cleanup() }, nil
}

// staticLab returns a static lab binary: exe itself, or one built into a
// temporary directory from the snacklab module holding the current
// directory (moduleRoot), so lab grade run in a subdirectory builds it too.
func staticLab(ctx context.Context, exe string, stdout io.Writer) (string, func(), error) {
	nothing := func() {}
	carries, err := isolate.CarriesMutants(exe)
	if err != nil {
		return "", nil, err
	}
	if containers.CheckStatic(exe) == nil && !carries {
		return exe, nothing, nil
	}
	// The containers' lab is static and carries no mutants (their search
	// texts are the reference's lines, and the judged must not read them).
	const cmd = "CGO_ENABLED=0 go build -tags nomutants -o bin/ ./cmd/lab"
	root, err := moduleRoot("")
	if err != nil {
		return "", nil, fmt.Errorf("grade: %s is dynamically linked or carries the mutants, and the grading containers take a static lab without them: build one with `%s` in the snacklab module (or grade trusted code with --trusted)", exe, cmd)
	}
	dir, err := os.MkdirTemp("", "snacklab-lab-*")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stdout, "lab grade: building the containers' lab: static, without the mutants (%s)\n", cmd)
	b := exec.CommandContext(ctx, "go", "build", "-tags", "nomutants", "-o", filepath.Join(dir, "lab"), "./cmd/lab")
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	b.Dir = root
	if out, err := b.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("grade: building a static lab: %v\n%s\nbuild it yourself with `%s`", err, out, cmd)
	}
	return filepath.Join(dir, "lab"), func() { os.RemoveAll(dir) }, nil
}
