package main

import (
	"context"
	"flag"
	"io"

	"snacklab/queue"
)

// queuectl show: a job with its redrive and investigation history (ID may be given bare). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["show"] = verb{summary: "a job with its redrive and investigation history (ID may be given bare)", needsDB: true, required: []string{"id"}, positional: "id",
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			return func(ctx context.Context, e *env) error {
				if err := queue.CheckID("id", *id); err != nil {
					return err // an id that cannot exist is invalid (3), not "not found" (8)
				}
				h, err := e.q.Show(ctx, *id)
				if err != nil {
					return err
				}
				return e.out(h, func(w io.Writer) { writeHistory(w, h, e.now) })
			}
		}}
}
