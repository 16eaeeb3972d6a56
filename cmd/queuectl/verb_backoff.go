package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"snacklab/internal/cliflag"
	"snacklab/queue"
)

// queuectl backoff: the retry delay after a failed attempt (no --db). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
}
