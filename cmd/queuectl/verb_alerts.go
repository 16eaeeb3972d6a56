package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
)

// queuectl alerts: exit 22 with one line per threshold crossed (ids and reasons only); silent when all is well; with no threshold given, any dead job (--max-dead 0). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["alerts"] = verb{summary: "exit 22 with one line per threshold crossed (ids and reasons only); silent when all is well; with no threshold given, any dead job (--max-dead 0)", needsDB: true,
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			thresholds := thresholdFlags(fs, "alert")
			return func(ctx context.Context, e *env) error {
				th, err := thresholds()
				if err != nil {
					return err
				}
				if th.Empty() {
					// The quarantine's point is that someone looks: by
					// default any dead job is worth a line.
					zero := int64(0)
					th.MaxDead = &zero
				}
				breaches, err := ops.Evaluate(ctx, e.q, e.now, th)
				if err != nil {
					return err
				}
				if err := e.out(map[string]any{"ok": len(breaches) == 0, "breaches": breaches}, func(w io.Writer) {
					for _, b := range breaches {
						fmt.Fprintln(w, b.Message)
					}
				}); err != nil {
					return err
				}
				if len(breaches) > 0 {
					return exitcode.With(exitcode.Alert, fmt.Errorf("%d threshold(s) crossed", len(breaches)))
				}
				return nil
			}
		}}
}
