package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// queuectl finish: record a delivery outcome under a token (exit 12 when stale). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
}
