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
