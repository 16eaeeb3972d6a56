package main

import (
	"context"
	"flag"
	"io"
	"time"

	"snacklab/internal/cliflag"
	"snacklab/internal/ops"
)

// queuectl dead: list quarantined jobs: id, reason, attempts, token, since when, last evidence, investigation (never content). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["dead"] = verb{summary: "list quarantined jobs: id, reason, attempts, token, since when, last evidence, investigation (never content)", needsDB: true,
		jsonUsage: "print one JSON array of the listed jobs, oldest first, on one line ([] when none)",
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			reason := fs.String("reason", "", "only this reason: permanent, exhausted or deadline")
			older := fs.Duration("older-than", 0, "only jobs dead for longer than this Go duration (90s, 2h), measured against --now-ms")
			limit := cliflag.NewInt(fs, "limit", 0, 0, 1_000_000, "at most this many jobs, oldest first (0: all)")
			return func(ctx context.Context, e *env) error {
				r, err := ops.ParseReasonFilter(*reason)
				if err != nil {
					return err
				}
				var olderThan *time.Duration
				if isSet(fs, "older-than") {
					olderThan = older
				}
				jobs, err := ops.ListDead(ctx, e.q, r, olderThan, e.now, int(limit.Get()))
				if err != nil {
					return err
				}
				if _, err := ops.WithTrails(ctx, e.q, jobs); err != nil {
					return err
				}
				return e.out(jobs, func(w io.Writer) { ops.WriteDeadTable(w, jobs) })
			}
		}}
}
