package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"snacklab/queue"
)

// queuectl init: create the queue file (an existing queue is left as is). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
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
}
