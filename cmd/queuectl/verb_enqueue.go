package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"snacklab/internal/cliflag"
	"snacklab/queue"
)

// queuectl enqueue: durably accept an order. One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
}
