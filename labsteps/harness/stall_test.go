package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"snacklab/labsteps/harness"
)

// stoppedHelper is a stand-in for the lab whose helper a judged program
// stopped: it stops itself with SIGSTOP before doing anything.
func stoppedHelper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lab")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nkill -STOP $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A judged-kill helper that a program of the judged uid stopped ends at the
// helper's own time limit, with ErrJudgedStall, instead of holding the step.
func TestKillAllStoppedHelper(t *testing.T) {
	old := harness.JudgedKillLimit
	harness.JudgedKillLimit = 300 * time.Millisecond
	defer func() { harness.JudgedKillLimit = old }()
	j := &harness.Judged{UID: 66100, GID: 66100, Exec: []string{stoppedHelper(t)}}
	done := make(chan error, 1)
	go func() { done <- j.KillAll() }()
	select {
	case err := <-done:
		if !errors.Is(err, harness.ErrJudgedStall) {
			t.Errorf("KillAll: got %v; want ErrJudgedStall", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("KillAll: still waiting a minute on a stopped helper; want its own limit to end it")
	}
}

// A judged SQL helper that never answers ends with the deadline of the
// context it was opened with (execSQL gives it SQLHelperLimit).
func TestOpenSQLStoppedHelper(t *testing.T) {
	j := &harness.Judged{UID: 66100, GID: 66100, Exec: []string{stoppedHelper(t)}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := j.OpenSQL(ctx, "file:q.db?mode=rw")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OpenSQL: got %v; want the deadline", err)
	}
}
