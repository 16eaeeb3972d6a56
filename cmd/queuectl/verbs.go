package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
	"snacklab/queue"
)

func init() {
	verbs["init"] = verb{summary: "create the queue file (an existing queue is left as is)", needsDB: true,
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				mode, err := e.q.JournalMode(ctx)
				if err != nil {
					return err
				}
				return e.out(map[string]any{"db": e.dbPath, "schema_version": queue.SchemaVersion, "journal_mode": mode},
					func(w io.Writer) {
						fmt.Fprintf(w, "queue %s ready (schema %d, journal_mode=%s)\n", e.dbPath, queue.SchemaVersion, mode)
					})
			}
		}}

	verbs["enqueue"] = verb{summary: "durably accept an order", needsDB: true, required: []string{"id", "qty"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			qty := cliflag.NewInt(fs, "qty", 0, 1, queue.MaxQty, "quantity (required)")
			maxAttempts := cliflag.NewInt(fs, "max-attempts", 5, 1, queue.MaxMaxAttempts, "attempts before the job is quarantined as exhausted")
			deadline := cliflag.NewInt(fs, "deadline-ms", 86_400_000, 1, queue.MaxDeadlineWindow, "deadline window, ms: the job is quarantined once its next try would be this long after enqueue (or redrive)")
			return func(ctx context.Context, e *env) error {
				job, dup, err := e.q.Enqueue(ctx, queue.NewJob{ID: *id, Qty: qty.Get(), MaxAttempts: maxAttempts.Get(), DeadlineWindowMs: deadline.Get()}, e.now)
				if err != nil {
					return err
				}
				return e.out(map[string]any{"job": job, "duplicate": dup}, func(w io.Writer) {
					what := "accepted"
					if dup {
						what = "already accepted (duplicate, nothing changed)"
					}
					fmt.Fprintf(w, "%s qty=%d %s\n", job.ID, job.Qty, what)
				})
			}
		}}

	verbs["claim"] = verb{summary: "lease one due job (exit 13 when none)", needsDB: true, required: []string{"owner"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			owner := fs.String("owner", "", "who holds the lease (required)")
			lease := cliflag.NewInt(fs, "lease-ms", 30_000, 1, queue.MaxLease, "lease length, ms")
			return func(ctx context.Context, e *env) error {
				job, ok, err := e.q.Claim(ctx, *owner, e.now, lease.Get())
				if err != nil {
					return err
				}
				if !ok {
					if err := e.out(map[string]any{"claimed": false}, func(w io.Writer) { fmt.Fprintln(w, "nothing claimable") }); err != nil {
						return err
					}
					return exitcode.With(exitcode.Empty, errors.New("nothing claimable"))
				}
				return e.out(map[string]any{"claimed": true, "job": job}, func(w io.Writer) {
					fmt.Fprintf(w, "%s leased to %s until %s with token %d (attempt %d of %d)\n",
						job.ID, job.Owner, ops.HumanTime(job.LeaseUntil, e.now), job.Token, job.Attempts, job.MaxAttempts)
				})
			}
		}}

	verbs["finish"] = verb{summary: "record a delivery outcome under a token (exit 12 when stale)", needsDB: true, required: []string{"id", "token", "outcome"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			tokenFlag := cliflag.NewInt(fs, "token", 0, 0, math.MaxInt64, "fencing token of the grant (required)")
			outcome := fs.String("outcome", "", "ok, retry or permanent (required)")
			ev := evidenceFlags(fs)
			return func(ctx context.Context, e *env) error {
				o, err := queue.ParseOutcome(*outcome)
				if err != nil {
					return err
				}
				evidence, err := ev()
				if err != nil {
					return err
				}
				token := tokenFlag.Get()
				job, applied, err := e.q.Finish(ctx, *id, token, o, e.now, evidence)
				if err != nil {
					return err
				}
				var jv any
				if job.ID != "" {
					jv = job
				}
				if err := e.out(map[string]any{"applied": applied, "job": jv}, func(w io.Writer) {
					switch {
					case applied && job.State == queue.Pending:
						fmt.Fprintf(w, "%s is now pending, retried at %s\n", job.ID, ops.HumanTime(job.AvailableAt, e.now))
					case applied:
						fmt.Fprintf(w, "%s is now %s%s\n", job.ID, job.State, reasonSuffix(job))
					default:
						fmt.Fprintf(w, "not applied: token %d does not hold %s\n", token, *id)
					}
				}); err != nil {
					return err
				}
				if !applied {
					return exitcode.With(exitcode.NotApplied, fmt.Errorf("not applied: token %d does not hold %s", token, *id))
				}
				return nil
			}
		}}

	verbs["attempt"] = verb{summary: "keep the evidence of an answer that decided nothing (BadAck, 3xx) under a token; the job stays leased (exit 12 when stale)", needsDB: true, required: []string{"id", "token", "error"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			tokenFlag := cliflag.NewInt(fs, "token", 0, 1, cliflag.MaxExact, "fencing token of the grant (required)")
			ev := evidenceFlags(fs)
			return func(ctx context.Context, e *env) error {
				evidence, err := ev()
				if err != nil {
					return err
				}
				token := tokenFlag.Get()
				applied, err := e.q.NoteAttempt(ctx, *id, token, evidence, e.now)
				if err != nil {
					return err
				}
				if err := e.out(map[string]any{"applied": applied}, func(w io.Writer) {
					if applied {
						fmt.Fprintf(w, "%s token %d: kept %s; the job stays leased\n", *id, token, evidence)
					} else {
						fmt.Fprintf(w, "not applied: token %d does not hold %s\n", token, *id)
					}
				}); err != nil {
					return err
				}
				if !applied {
					return exitcode.With(exitcode.NotApplied, fmt.Errorf("not applied: token %d does not hold %s", token, *id))
				}
				return nil
			}
		}}

	// "redrive" (single and bulk) is registered in ops.go.

	verbs["investigate"] = verb{summary: "record that someone looked at a job (ID may be given bare)", needsDB: true, required: []string{"id", "note"}, positional: "id",
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			note := fs.String("note", "", "ticket id of the investigation (required)")
			return func(ctx context.Context, e *env) error {
				inv, err := e.q.Investigate(ctx, *id, *note, e.now)
				if err != nil {
					return err
				}
				return e.out(map[string]any{"investigation": inv}, func(w io.Writer) {
					fmt.Fprintf(w, "%s investigated under %s\n", inv.JobID, inv.Note)
				})
			}
		}}

	verbs["show"] = verb{summary: "a job with its redrive and investigation history (ID may be given bare)", needsDB: true, required: []string{"id"}, positional: "id",
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			return func(ctx context.Context, e *env) error {
				if err := queue.CheckID("id", *id); err != nil {
					return err // an id that cannot exist is invalid (3), not "not found" (8)
				}
				h, err := e.q.Show(ctx, *id)
				if err != nil {
					return err
				}
				return e.out(h, func(w io.Writer) { writeHistory(w, h, e.now) })
			}
		}}

	verbs["backoff"] = verb{summary: "the retry delay after a failed attempt (no --db)", required: []string{"id", "attempt"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			attemptFlag := cliflag.NewInt(fs, "attempt", 0, 1, queue.MaxMaxAttempts, "the attempt that failed, from 1 (required)")
			return func(ctx context.Context, e *env) error {
				if err := queue.CheckID("id", *id); err != nil {
					return err
				}
				attempt := int(attemptFlag.Get())
				d := queue.Backoff(*id, attempt)
				return e.out(map[string]any{"id": *id, "attempt": attempt, "delay_ms": d}, func(w io.Writer) {
					fmt.Fprintf(w, "%d\n", d)
				})
			}
		}}

	verbs["check"] = verb{summary: "SQLite's integrity check and the contract's invariants (exit 5 listing the first problems); reads only", needsDB: true,
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			max := cliflag.NewInt(fs, "max", 20, 1, 10_000, "list at most this many problems")
			return func(ctx context.Context, e *env) error {
				// On a snapshot: writers wait only for each step of its copy.
				problems, total, _, err := e.q.CheckSnapshot(ctx, int(max.Get()), queue.SnapshotOptions{})
				if err != nil {
					return err
				}
				if problems == nil {
					problems = []queue.Problem{}
				}
				if err := e.out(map[string]any{"ok": total == 0, "total": total, "problems": problems}, func(w io.Writer) {
					if total == 0 {
						fmt.Fprintf(w, "%s: ok (integrity and invariants)\n", e.dbPath)
					}
					for _, p := range problems {
						fmt.Fprintln(w, strings.ReplaceAll(p.String(), "\n", "; "))
					}
					if total > len(problems) {
						fmt.Fprintf(w, "… and more (at least %d problems in all)\n", total)
					}
				}); err != nil {
					return err
				}
				if total > 0 {
					return exitcode.With(exitcode.NotQueue, fmt.Errorf("%d problem(s), first: %s", total, problems[0]))
				}
				return nil
			}
		}}

	// "stats", "dead", "alerts" and "serve" are registered in ops.go.
}

// writeHistory prints a job, its attempts with their evidence, and its
// audit trail for a person, every instant in ISO and relative to now.
func writeHistory(w io.Writer, h queue.History, now int64) {
	j := h.Job
	fmt.Fprintf(w, "%s qty=%d %s%s attempts=%d/%d token=%d\n",
		j.ID, j.Qty, j.State, reasonSuffix(j), j.Attempts, j.MaxAttempts, j.Token)
	switch j.State {
	case queue.Pending:
		fmt.Fprintf(w, "  available at %s\n", ops.HumanTime(j.AvailableAt, now))
	case queue.Leased:
		fmt.Fprintf(w, "  leased to %s until %s\n", j.Owner, ops.HumanTime(j.LeaseUntil, now))
	case queue.Done, queue.Dead:
		fmt.Fprintf(w, "  %s at %s\n", j.State, ops.HumanTime(j.UpdatedAt, now))
	}
	if j.State == queue.Pending || j.State == queue.Leased {
		fmt.Fprintf(w, "  deadline %s\n", ops.HumanTime(j.DeadlineAt, now))
	}
	for _, a := range h.Attempts {
		fmt.Fprintf(w, "  attempt %s (token %d)\n", ops.AttemptText(a, now), a.Token)
	}
	for _, r := range h.Redrives {
		fmt.Fprintf(w, "  redrive at %s: was %s with token %d, note %s\n", ops.HumanTime(r.AtMs, now), r.PrevReason, r.PrevToken, r.Note)
	}
	for _, i := range h.Investigations {
		fmt.Fprintf(w, "  investigated at %s, note %s\n", ops.HumanTime(i.AtMs, now), i.Note)
	}
}

// evidenceFlags defines --status and --error (CONTRACT.md §3, finish
// evidence) and returns what reads them.
func evidenceFlags(fs *flag.FlagSet) func() (queue.Evidence, error) {
	status := cliflag.NewInt(fs, "status", 0, 0, 599, "evidence: the HTTP status of the attempt (100-599; 0 or absent: no answer)")
	class := fs.String("error", "", "evidence: why it failed, one of timeout refused reset closed transport http 3xx badack")
	return func() (queue.Evidence, error) {
		ev := queue.Evidence{Status: int(status.Get())}
		c, err := queue.ParseErrorClass(*class)
		if err != nil {
			return ev, err
		}
		ev.Error = c
		return ev, ev.Check()
	}
}

func reasonSuffix(j queue.Job) string {
	if j.Reason == "" {
		return ""
	}
	return " (" + string(j.Reason) + ")"
}
