package harness_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// A check carries the clause ids named before it, until the next Clause; a
// failed check ends the body and is recorded with them; a part of Parallel
// starts with none.
func TestChecksCarryTheirClauses(t *testing.T) {
	l := result.Limits{Wait: time.Second, Block: time.Second, Drain: time.Second, Step: time.Minute}
	h := harness.New(context.Background(), t.TempDir(), t.TempDir(), l)
	problem := h.Do(func(h *harness.Harness) {
		h.Check("before any clause", true, "x", "x", "why")
		h.Clause("§2.enqueue.dup")
		h.Check("under one clause", true, "x", "x", "why")
		h.Parallel(harness.Part{Name: "a part", Run: func(h *harness.Harness) {
			h.Check("in a part", true, "x", "x", "why")
		}})
		h.Clause("§1.id", "§6.nothing-written")
		h.Check("fails under two", false, "x", "y", "why")
		h.Check("never reached", true, "x", "x", "why")
	})
	if problem != "" {
		t.Fatalf("Do: problem %q, want none (a failed check is not a harness problem)", problem)
	}
	var r result.Result
	h.Record(&r)
	want := map[string][]string{
		"before any clause": nil,
		"under one clause":  {"§2.enqueue.dup"},
		"in a part":         nil,
		"fails under two":   {"§1.id", "§6.nothing-written"},
	}
	if len(r.Checks) != len(want) {
		t.Fatalf("recorded %d checks, want %d: %+v", len(r.Checks), len(want), r.Checks)
	}
	for _, c := range r.Checks {
		if got := c.Clause; !slices.Equal(got, want[c.What]) {
			t.Errorf("check %q: clause %v, want %v", c.What, got, want[c.What])
		}
	}
	if c := r.Failed(); c == nil || c.What != "fails under two" {
		t.Errorf("failed check %+v, want %q", c, "fails under two")
	}
}

// StopAt ends every part of a step at the first failure its rule holds
// for: a part still waiting returns at once, and what it then fails counts
// as a wait that ran out, not as a wrong answer; a failure the rule does
// not hold for stops nothing.
func TestStopAt(t *testing.T) {
	l := result.Limits{Wait: time.Minute, Block: time.Minute, Drain: time.Minute, Step: time.Hour}
	onClause := func(c result.Check) bool { return slices.Contains(c.Clause, "§4.finish.stale") }
	tests := []struct {
		name        string
		failClause  string
		wantStopped bool
	}{
		{"a failure on the rule's clause stops the step", "§4.finish.stale", true},
		{"a failure on another clause stops nothing", "§1.id", false},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		h := harness.New(ctx, t.TempDir(), t.TempDir(), l)
		h.StopAt(onClause, cancel)
		failed := make(chan struct{})
		h.Do(func(h *harness.Harness) {
			h.Parallel(
				harness.Part{Name: "fails", Run: func(h *harness.Harness) {
					defer close(failed)
					h.Clause(tc.failClause)
					h.Check("the wrong answer", false, "x", "y", "why")
				}},
				harness.Part{Name: "waits", Run: func(h *harness.Harness) {
					if tc.wantStopped {
						h.WaitClock(time.Now().Add(time.Minute)) // at once if the step is stopped
					} else {
						<-failed
					}
					h.Clause("§2.enqueue.dup")
					h.Check("after the wait", false, "x", "cut short", "why")
				}})
		})
		cancel()
		var r result.Result
		h.Record(&r)
		byWhat := map[string]result.Check{}
		for _, c := range r.Checks {
			byWhat[c.What] = c
		}
		if c := byWhat["the wrong answer"]; c.OK || c.TimedOut {
			t.Errorf("%s: the failure that stopped it: %+v, want a wrong answer (not OK, not timed out)", tc.name, c)
		}
		after, ok := byWhat["after the wait"]
		if !ok {
			t.Fatalf("%s: the waiting part recorded %+v, want its check", tc.name, r.Checks)
		}
		if after.TimedOut != tc.wantStopped {
			t.Errorf("%s: the waiting part's failure TimedOut = %v, want %v (%s)", tc.name, after.TimedOut, tc.wantStopped, after.Observed)
		}
	}
}
