package model

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Runner plays sequences against one implementation's queuectl, each on a
// fresh queue file under Dir.
type Runner struct {
	Queuectl string // path of the executable under test
	Dir      string // where queue files are made
	Name     string // the start of their names ("model-" when empty), so Runners may share Dir
	// Exec, when set, runs one queuectl process with args instead of the
	// Runner's own exec (the lab runs them through its harness, which logs,
	// counts and times them). Its error is the harness's trouble, never a
	// verdict.
	Exec func(ctx context.Context, args []string) (Observed, error)
	// Keep leaves each sequence's queue file in Dir (the lab keeps a failing
	// step's files for the learner); else it is removed after the sequence.
	Keep bool
	n    atomic.Int64
}

// ErrInit is a queuectl whose init of a fresh queue file failed: the
// implementation's wrong answer (CONTRACT §3.init), not the harness's
// trouble, though no sequence could be played.
var ErrInit = errors.New("queuectl init of a fresh queue file failed")

// Mismatch is the first answer of a sequence that departs from the model.
type Mismatch struct {
	Ops      []Op // the sequence, up to and including the failing op
	Step     int  // index of the failing op in Ops
	Expected Expect
	Observed Observed
	Diff     string
}

// Failing reports the first mismatch of ops, or nil when every answer
// matched. An error is the harness's own trouble (init failed, a process
// could not start), never the implementation's verdict.
func (r *Runner) Failing(ctx context.Context, ops []Op) (*Mismatch, error) {
	// A file of its own in Dir, not a directory: the lab may run the
	// programs as another user, who can write in Dir but not in a
	// directory the lab made.
	db := filepath.Join(r.Dir, cmp.Or(r.Name, "model-")+strconv.FormatInt(r.n.Add(1), 10)+".db")
	if !r.Keep {
		defer func() {
			for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
				os.Remove(db + suffix)
			}
		}()
	}
	args := []string{"init", "--db", db, "--json"}
	if o, err := r.exec(ctx, args); err != nil {
		return nil, err
	} else if o.Exit != 0 || o.Signal != "" {
		return nil, fmt.Errorf("%w: queuectl %s: exit %d %s: %s", ErrInit, strings.Join(args, " "), o.Exit, o.Signal, strings.TrimSpace(o.Stderr))
	}
	q := New()
	for i, op := range ops {
		exp := q.Apply(op)
		obs, err := r.exec(ctx, op.Args(db))
		if err != nil {
			return nil, err
		}
		if d := Diff(exp, obs); d != "" {
			return &Mismatch{Ops: ops[:i+1], Step: i, Expected: exp, Observed: obs, Diff: d}, nil
		}
	}
	return nil, nil
}

// exec runs one queuectl process; a process that hangs is cut at 30 s and
// reported as the harness's error, not as an exit code.
func (r *Runner) exec(ctx context.Context, args []string) (Observed, error) {
	if r.Exec != nil {
		return r.Exec(ctx, args)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Queuectl, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	o := Observed{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return o, fmt.Errorf("queuectl %s: %w", args[0], ctx.Err())
	case errors.As(err, &ee) && ee.Exited():
		o.Exit = ee.ExitCode()
	case errors.As(err, &ee):
		o.Exit, o.Signal = -1, ee.String()
	case err != nil:
		return o, fmt.Errorf("queuectl %s: %w", args[0], err)
	}
	return o, nil
}
