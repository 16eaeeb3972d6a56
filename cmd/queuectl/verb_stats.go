package main

import (
	"context"
	"flag"
	"io"

	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
)

// queuectl stats: counts by state, dead by reason and ratio, oldest dead, last investigation, redrive results. One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["stats"] = verb{summary: "counts by state, dead by reason and ratio, oldest dead, last investigation, redrive results", needsDB: true,
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			prom := fs.Bool("prom", false, "print Prometheus text exposition, for node_exporter's textfile collector (dead ratio = dead with reason / all dead, 0 when none dead)")
			return func(ctx context.Context, e *env) error {
				if *prom && e.json {
					return exitcode.Usagef("--prom and --json exclude each other. Try: queuectl stats -h")
				}
				r, err := ops.Collect(ctx, e.q, e.now)
				if err != nil {
					return err
				}
				if *prom {
					return ops.WritePrometheus(e.stdout, r)
				}
				return e.out(r, func(w io.Writer) { ops.WriteTable(w, r) })
			}
		}}
}
