package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// queuectl claim: lease one due job (exit 13 when none). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
}
