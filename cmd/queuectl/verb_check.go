package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/queue"
)

// queuectl check: SQLite's integrity check and the contract's invariants (exit 5 listing the first problems); reads only. One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
