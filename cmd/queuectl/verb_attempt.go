package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
)

// queuectl attempt: keep the evidence of an answer that decided nothing (BadAck, 3xx) under a token; the job stays leased (exit 12 when stale). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["attempt"] = verb{summary: "keep the evidence of an answer that decided nothing (BadAck, 3xx) under a token; the job stays leased (exit 12 when stale)", needsDB: true, required: []string{"id", "token", "error"},
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			id := fs.String("id", "", "order id (required)")
			tokenFlag := cliflag.NewInt(fs, "token", 0, 1, cliflag.MaxExact, "fencing token of the grant (required)")
			ev := evidenceFlags(fs)
			return func(ctx context.Context, e *env) error {
				evidence, err := ev()
				if err != nil {
					return err
				}
				token := tokenFlag.Get()
				applied, err := e.q.NoteAttempt(ctx, *id, token, evidence, e.now)
				if err != nil {
					return err
				}
				if err := e.out(map[string]any{"applied": applied}, func(w io.Writer) {
					if applied {
						fmt.Fprintf(w, "%s token %d: kept %s; the job stays leased\n", *id, token, evidence)
					} else {
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

	// "redrive" (single and bulk) is registered in ops.go.
}
