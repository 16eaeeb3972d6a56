package main

import (
	"context"
	"flag"
	"fmt"
	"net"

	"snacklab/internal/ops"
)

// queuectl serve: read-only dashboard and /metrics over HTTP (GET and HEAD only). One file per verb: its flags, its action and
// its output (CONTRACT.md §3).
func init() {
	verbs["serve"] = verb{summary: "read-only dashboard and /metrics over HTTP (GET and HEAD only)", needsDB: true,
		jsonUsage: "accepted, as by every verb, and ignored: serve prints only its listening on ADDR line (the dashboard has /metrics for programs)",
		setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			addr := fs.String("addr", "127.0.0.1:0", "address to listen on; there is no access control, so keep it on loopback")
			thresholds := thresholdFlags(fs, "highlight under Attention")
			return func(ctx context.Context, e *env) error {
				th, err := thresholds()
				if err != nil {
					return err
				}
				h := ops.NewDashboard(e.q, clockOf(fs, e))
				if err := h.SetThresholds(th); err != nil {
					return err
				}
				return ops.Serve(ctx, *addr, h, func(a net.Addr) { fmt.Fprintf(e.stdout, "listening on %s\n", a) })
			}
		}}
}
