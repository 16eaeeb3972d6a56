package model

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Shrink reduces a failing sequence to a smaller one that still fails,
// replaying each candidate on a fresh queue file (the model is recomputed
// for it, so the expectation always fits the shorter story). It first tries
// two cuts the model suggests, one replay each: without the commands that
// changed nothing (reads and refusals), then without those of other jobs
// than the failing one. Then it is delta debugging: drop chunks while any
// drop keeps the failure, then single ops until no one op can go. Any mismatch counts as still failing: a shorter
// failure of another answer is as useful to a learner as the original.
// budget bounds the number of replays.
func Shrink(ctx context.Context, r *Runner, m *Mismatch, budget int) (*Mismatch, error) {
	best := m
	try := func(ops []Op) (bool, error) {
		if budget <= 0 || len(ops) == 0 {
			return false, nil
		}
		budget--
		got, err := r.Failing(ctx, ops)
		if err != nil || got == nil {
			return false, err
		}
		best = got // Failing truncates at the first mismatch
		return true, nil
	}
	for _, keep := range []func(ops []Op) []Op{inertDropped, othersDropped} {
		if cand := keep(best.Ops); len(cand) < len(best.Ops) {
			if _, err := try(cand); err != nil {
				return best, err
			}
		}
	}
	for n := 2; len(best.Ops) >= 2; {
		chunk := (len(best.Ops) + n - 1) / n
		dropped := false
		for start := 0; start < len(best.Ops); start += chunk {
			cand := slices.Concat(best.Ops[:start], best.Ops[min(start+chunk, len(best.Ops)):])
			ok, err := try(cand)
			if err != nil {
				return best, err
			}
			if ok {
				n, dropped = max(n-1, 2), true
				break
			}
		}
		if !dropped {
			if n >= len(best.Ops) {
				break
			}
			n = min(2*n, len(best.Ops))
		}
	}
	for changed := true; changed; {
		changed = false
		for i := range best.Ops {
			ok, err := try(slices.Delete(slices.Clone(best.Ops), i, i+1))
			if err != nil {
				return best, err
			}
			if ok {
				changed = true
				break
			}
		}
	}
	return best, nil
}

// inertDropped is ops without those the model says changed nothing: show,
// stats and the refusals (a claim may sweep, so every claim stays), and
// always with the last, the failing one.
func inertDropped(ops []Op) []Op {
	q := New()
	var out []Op
	for i, op := range ops {
		e := q.Apply(op)
		inert := op.Verb == "show" || op.Verb == "stats" || (op.Verb != "claim" && e.Exit != 0)
		if !inert || i == len(ops)-1 {
			out = append(out, op)
		}
	}
	return out
}

// othersDropped is ops with only the failing command's job: its own
// commands and the claims that granted it (ops unchanged when the failing
// command names no job, a claim or stats).
func othersDropped(ops []Op) []Op {
	last := ops[len(ops)-1]
	if last.Verb == "claim" || last.Verb == "stats" {
		return ops
	}
	q := New()
	var out []Op
	for _, op := range ops {
		e := q.Apply(op)
		granted := ""
		if job, ok := e.JSON["job"].(map[string]any); ok && op.Verb == "claim" {
			granted, _ = job["id"].(string)
		}
		if op.ID == last.ID && op.Verb != "claim" || granted == last.ID {
			out = append(out, op)
		}
	}
	return out
}

// Commands are the mismatch's sequence as lines a learner can paste, on the
// queue file db: a fresh file made by init, then each operation.
func (m *Mismatch) Commands(db string) []string {
	out := []string{fmt.Sprintf("rm -f %s; queuectl init --db %s --json", db, db)}
	for _, op := range m.Ops {
		out = append(out, op.Shell(db))
	}
	return out
}

// Report is the mismatch as a learner reads it: the commands to paste, what
// the model expected, what was observed, and the clause.
func (m *Mismatch) Report(seed uint64) string {
	var b strings.Builder
	db := "q.db"
	fmt.Fprintf(&b, "seed %d: %d commands replay it (the last one's answer is wrong):\n", seed, len(m.Ops)+1)
	for _, c := range m.Commands(db) {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "operation: %s (step %d)\n", m.Ops[m.Step].Verb, m.Step+1)
	fmt.Fprintf(&b, "expected:  exit %d", m.Expected.Exit)
	if m.Expected.JSON != nil {
		fmt.Fprintf(&b, " and %s", show(m.Expected.JSON))
	} else {
		b.WriteString(" and nothing on stdout")
	}
	if m.Observed.Signal != "" {
		fmt.Fprintf(&b, "\nobserved:  ended by %s, stdout %q", m.Observed.Signal, strings.TrimSpace(m.Observed.Stdout))
	} else {
		fmt.Fprintf(&b, "\nobserved:  exit %d, stdout %q", m.Observed.Exit, strings.TrimSpace(m.Observed.Stdout))
	}
	if s := strings.TrimSpace(m.Observed.Stderr); s != "" {
		fmt.Fprintf(&b, ", stderr %q", s)
	}
	fmt.Fprintf(&b, "\ndiffers:   %s\nclause:    %s\n", m.Diff, m.Expected.Clause)
	return b.String()
}

// clauseID is a clause id as a Diff or an Expect names it (§2.claim.order).
var clauseID = regexp.MustCompile(`§[0-9]+(\.[a-z0-9-]+)+`)

// Clauses are the ids of the rules the mismatch breaks: those that decide
// the expected answer, then those its difference names (§3.json.one).
func (m *Mismatch) Clauses() []string {
	var out []string
	for _, id := range clauseID.FindAllString(m.Expected.Clause+" "+m.Diff, -1) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
