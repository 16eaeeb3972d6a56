package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// queuectl investigate: record that someone looked at a job (ID may be given bare). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
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
}
