package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// The operator's verbs: they wire flags to internal/ops and print.
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

	verbs["dead"] = verb{summary: "list quarantined jobs: id, reason, attempts, token, since when, last evidence, investigation (never content)", needsDB: true,
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

	verbs["serve"] = verb{summary: "read-only dashboard and /metrics over HTTP (GET and HEAD only)", needsDB: true,
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

// thresholdFlags defines --max-dead, --max-oldest-age and --max-ratio on fs
// (for alerts, and for serve's Attention box) and returns what reads them.
func thresholdFlags(fs *flag.FlagSet, act string) func() (ops.Thresholds, error) {
	maxDead := cliflag.NewInt(fs, "max-dead", 0, 0, cliflag.MaxExact, act+" when more than this many jobs are dead")
	maxAge := fs.Duration("max-oldest-age", 0, act+" when a dead job has been dead longer than this Go duration (90s, 2h), measured against --now-ms")
	var ratios stringsFlag
	fs.Var(&ratios, "max-ratio", "REASON=R: "+act+" when dead with REASON / all dead exceeds R (0..1); repeatable")
	return func() (ops.Thresholds, error) {
		th := ops.Thresholds{MaxRatio: map[queue.Reason]float64{}}
		if isSet(fs, "max-dead") {
			v := maxDead.Get()
			th.MaxDead = &v
		}
		if isSet(fs, "max-oldest-age") {
			th.MaxOldestAge = maxAge
		}
		for _, s := range ratios {
			reason, r, err := ops.ParseRatio(s)
			if err != nil {
				return th, err
			}
			th.MaxRatio[reason] = r
		}
		return th, nil
	}
}

// clockOf is the injected clock, held still, when --now-ms was given, and
// the wall clock otherwise: a long bulk redrive or a server must not stamp
// everything with the instant it started.
func clockOf(fs *flag.FlagSet, e *env) func() int64 {
	if isSet(fs, "now-ms") {
		now := e.now
		return func() int64 { return now }
	}
	return func() int64 { return time.Now().UnixMilli() }
}

// columns is the terminal's width for the progress bar: $COLUMNS when set
// (the user's word), else what the terminal says, else ops.DefaultColumns.
func columns(fd int) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if w, _, err := term.GetSize(fd); err == nil && w > 0 {
		return w
	}
	return ops.DefaultColumns
}

// stringsFlag collects a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
