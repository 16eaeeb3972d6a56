// Command sender delivers queued snack orders to the receiver (CONTRACT.md §4):
// `run-once` delivers one job, `run` keeps going until nothing is claimable or
// it is asked to stop. Several senders may share one queue file; the lease and
// its fencing token keep them from finishing each other's work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"snacklab/internal/cliflag"
	"snacklab/internal/exitcode"
	"snacklab/queue"
	"snacklab/sender"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, func(code int) { os.Exit(code) })
	stop()
	os.Exit(report(err, os.Stderr))
}

const synopsis = "sender run-once|run --db FILE --url URL --owner NAME [--lease-ms 30000] [--now-ms N] [--timeout-ms 5000] [--busy-timeout-ms 5000] [--exit-after-receipt CODE] [--batch 1] [--json]"

// report prints err as one line and returns its exit code. "Nothing
// claimable" is an answer, not a failure, and the events already said it.
func report(err error, stderr io.Writer) int {
	code := exitcode.Code(err)
	if err != nil && code != exitcode.Empty {
		fmt.Fprintf(stderr, "sender: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return code
}

// senderFlags are the flags of run-once and run.
type senderFlags struct {
	dbPath, rawURL, owner                        *string
	leaseMs, nowMs, timeoutMs, busyMs, exitAfter *cliflag.Int
	batch                                        *cliflag.Int
	asJSON                                       *bool
}

// flags declares the flags of a subcommand, with their ranges (CONTRACT.md §4).
func flags(name string) (*flag.FlagSet, senderFlags) {
	fs := flag.NewFlagSet("sender "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, on one line, by report
	var f senderFlags
	f.dbPath = fs.String("db", "", "queue database file (required)")
	f.rawURL = fs.String("url", "", "receiver base URL, e.g. http://127.0.0.1:8080 (required)")
	f.owner = fs.String("owner", "", "name this sender claims jobs under (required)")
	f.leaseMs = cliflag.NewInt(fs, "lease-ms", 30000, 1, queue.MaxLease, "how long a claim is ours, ms")
	f.nowMs = cliflag.NewInt(fs, "now-ms", 0, 0, cliflag.MaxExact, "hold the clock at this ms since the epoch (default: the real clock)")
	f.timeoutMs = cliflag.NewInt(fs, "timeout-ms", 5000, 1, queue.MaxLease, "bound on one POST, ms")
	f.busyMs = cliflag.NewInt(fs, "busy-timeout-ms", 5000, 0, queue.MaxLease, "how long to wait for another process's lock, ms (0: 5000)")
	f.exitAfter = cliflag.NewInt(fs, "exit-after-receipt", 0, 1, 125, "exit with this code right after the response is read, before classifying or finishing")
	f.batch = cliflag.NewInt(fs, "batch", 1, 1, queue.MaxBatch, "claim, deliver and finish up to this many jobs per claim and per finish transaction (1: one job at a time)")
	f.asJSON = fs.Bool("json", false, "print events as JSON lines")
	return fs, f
}

// errNothingClaimable is run-once's exit 13.
var errNothingClaimable = exitcode.With(exitcode.Empty, errors.New("nothing claimable"))

// run is the whole program but for the process: exit is what the crash
// switch calls, so that it ends the process without any deferred cleanup.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, exit func(code int)) error {
	if len(args) == 0 {
		return exitcode.Usagef("no subcommand given. Try: %s", synopsis)
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "usage: %s\n", synopsis)
		fs, _ := flags("run-once")
		fmt.Fprintln(stdout, "flags (run-once and run):")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	case "run-once", "run":
	default:
		return exitcode.Usagef("unknown subcommand %q. Try: %s", name, synopsis)
	}

	fs, f := flags(name)
	dbPath, rawURL, owner, asJSON := f.dbPath, f.rawURL, f.owner, f.asJSON
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: %s\n", synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return exitcode.Usagef("%s: %v. Try: %s", name, err, synopsis)
	}
	if fs.NArg() > 0 {
		return exitcode.Usagef("%s: unexpected argument %q. Try: %s", name, fs.Arg(0), synopsis)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range []string{"db", "url", "owner"} {
		if !set[r] {
			return exitcode.Usagef("%s: --%s is required. Try: %s", name, r, synopsis)
		}
	}

	// Every value is checked before the file is opened: a refused command
	// line must not touch the queue.
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: %s", name, queue.ErrInvalid, fmt.Sprintf(format, a...))
	}
	if *dbPath == "" {
		return invalid("--db is empty")
	}
	if u, err := url.Parse(*rawURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("--url %q: want http://HOST:PORT", *rawURL)
	}
	if err := queue.CheckID("owner", *owner); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := cliflag.Check(fs); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	leaseMs, timeoutMs, busyMs := f.leaseMs.Get(), f.timeoutMs.Get(), f.busyMs.Get()

	q, err := queue.Open(*dbPath, queue.Options{BusyTimeout: time.Duration(busyMs) * time.Millisecond})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer q.Close()
	s := &sender.Sender{
		Queue:   q,
		URL:     *rawURL,
		Owner:   *owner,
		LeaseMs: leaseMs,
		Timeout: time.Duration(timeoutMs) * time.Millisecond,
		Events:  stdout,
		Human:   !*asJSON,
		Batch:   int(f.batch.Get()),
	}
	if set["now-ms"] {
		held := f.nowMs.Get()
		s.Now = func() int64 { return held }
	}
	if set["exit-after-receipt"] {
		code := int(f.exitAfter.Get())
		s.ExitAfterReceipt = func() { exit(code) }
	}

	if name == "run" {
		if _, err := s.Run(ctx); err != nil {
			return fmt.Errorf("run: %w", withCode(err))
		}
		return nil
	}
	return runOnce(ctx, s)
}

// runOnce is run-once: one job, or with --batch one batch; nothing
// claimable is exit 13.
func runOnce(ctx context.Context, s *sender.Sender) error {
	claimed := false
	var err error
	if s.Batch > 1 {
		var res []sender.Result
		res, err = s.RunBatch(ctx)
		claimed = len(res) > 0
	} else {
		var res sender.Result
		res, err = s.RunOnce(ctx)
		claimed = res.Claimed
	}
	if err != nil {
		return fmt.Errorf("run-once: %w", withCode(err))
	}
	if !claimed {
		return errNothingClaimable
	}
	return nil
}

// withCode attaches the sender-specific exit codes of CONTRACT.md §6; queue
// errors already map through exitcode.Code.
func withCode(err error) error {
	switch {
	case errors.Is(err, sender.ErrBadAck):
		return exitcode.With(exitcode.BadAck, err)
	case errors.Is(err, sender.ErrUnexpected):
		return exitcode.With(exitcode.Delivery, err)
	case errors.Is(err, sender.ErrStale):
		return exitcode.With(exitcode.NotApplied, err)
	}
	return err
}
