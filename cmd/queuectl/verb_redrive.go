package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/term"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// queuectl redrive: send one dead job (--id) or, paced, every dead job of a reason (--reason) back with a fresh budget. One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["redrive"] = verb{summary: "send one dead job (--id) or, paced, every dead job of a reason (--reason) back with a fresh budget", needsDB: true, required: []string{"note"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id: redrive this one job")
			note := fs.String("note", "", "ticket id of the diagnosis or fix (required)")
			reason := fs.String("reason", "", "bulk: redrive the dead jobs with this reason, oldest first, one transaction and audit row each")
			rateFlag := fs.String("rate", "", "bulk, required: at most this many jobs per second, minute or hour (5/s, 30/m, 600/h); from 1/h to "+strconv.Itoa(ops.MaxRate)+"/s")
			limit := cliflag.NewInt(fs, "limit", 0, 0, 1_000_000, "bulk: at most this many jobs, oldest first (0: all)")
			dryRun := fs.Bool("dry-run", false, "bulk: list what would be redriven, change nothing")
			return func(ctx context.Context, e *env) error {
				bulkOnly := []string{"rate", "limit", "dry-run"}
				switch {
				case isSet(fs, "id") && isSet(fs, "reason"):
					return exitcode.Usagef("give --id or --reason, not both. Try: queuectl redrive -h")
				case isSet(fs, "id"):
					for _, f := range bulkOnly {
						if isSet(fs, f) {
							return exitcode.Usagef("--%s goes with --reason, not --id. Try: queuectl redrive -h", f)
						}
					}
					job, rd, err := e.q.Redrive(ctx, *id, *note, e.now)
					if err != nil {
						return err
					}
					return e.out(map[string]any{"job": job, "redrive": rd}, func(w io.Writer) {
						fmt.Fprintf(w, "%s redriven (was %s, token stays %d), note %s\n", job.ID, rd.PrevReason, job.Token, rd.Note)
					})
				case !isSet(fs, "reason"):
					return exitcode.Usagef("--id or --reason is required. Try: queuectl redrive -h")
				case !isSet(fs, "rate"):
					return exitcode.Usagef("--rate is required with --reason, e.g. --rate 5/s. Try: queuectl redrive -h")
				}
				r, err := queue.ParseReason(*reason)
				if err != nil {
					return err
				}
				if err := queue.CheckNote(*note); err != nil {
					return err
				}
				if err := cliflag.CheckRate(*rateFlag); err != nil {
					return err
				}
				perSecond, err := ops.ParseRate(*rateFlag)
				if err != nil {
					return err
				}
				b := ops.BulkRedrive{Reason: r, Note: *note, Limit: int(limit.Get()), DryRun: *dryRun,
					Pace: ops.NewPacer(perSecond, nil), NowMs: clockOf(fs, e)}
				if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
					b.Progress = ops.Bar(e.stderr, columns(int(f.Fd())), nil)
				} else if !e.json {
					b.Progress = ops.Lines(e.stdout)
				}
				res, err := b.Run(ctx, e.q)
				if err != nil {
					return fmt.Errorf("stopped after %d redriven, %d skipped of %d: %w", len(res.Redriven), len(res.Skipped), res.Candidates, err)
				}
				return e.out(res, func(w io.Writer) { ops.WriteBulkSummary(w, res, perSecond) })
			}
		}}
}
