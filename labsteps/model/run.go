package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// Runner plays sequences against one implementation's queuectl, each on a
// fresh queue file under Dir.
type Runner struct {
	Queuectl string // path of the executable under test
	Dir      string // where queue files are made
	n        atomic.Int64
}

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
	dir := filepath.Join(r.Dir, "q"+strconv.FormatInt(r.n.Add(1), 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "q.db")
	if o, err := r.exec(ctx, []string{"init", "--db", db, "--json"}); err != nil {
		return nil, err
	} else if o.Exit != 0 {
		return nil, fmt.Errorf("queuectl init: exit %d: %s", o.Exit, o.Stderr)
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
	case err != nil:
		return o, fmt.Errorf("queuectl %s: %w", args[0], err)
	}
	return o, nil
}
