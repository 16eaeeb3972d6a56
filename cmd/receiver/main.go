// Command receiver is the lab's idempotent HTTP receiver (CONTRACT §5): it
// prints "listening on ADDR", then one JSON line per order, and shuts down
// gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"snacklab/receiver"
)

// shutdownGrace bounds how long in-flight requests may run after a signal.
const shutdownGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "receiver: %s\n", oneLine(err))
	}
	os.Exit(exitCode(err))
}

// usageError marks a command line that could not be parsed (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode maps an error to CONTRACT §6. It is local because
// internal/exitcode maps the queue's sentinels, not the receiver's.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.Is(err, receiver.ErrInvalid):
		return 3
	case errors.Is(err, receiver.ErrNotDatabase):
		return 5
	case errors.Is(err, receiver.ErrBusy):
		return 6
	default:
		return 1
	}
}

// oneLine keeps an error on the single stderr line the contract promises.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// idList collects a repeatable flag.
type idList []string

func (l *idList) String() string     { return strings.Join(*l, ",") }
func (l *idList) Set(s string) error { *l = append(*l, s); return nil }

// run is main without the process: testable, and every error comes back for
// main to print and map once.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one-line errors only; -h prints usage itself
	db := fs.String("db", "", "receiver database `file` (created if missing; required)")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address`")
	failNext := fs.Int("fail-next", 0, "answer the next `N` orders 503")
	var rejectIDs idList
	fs.Var(&rejectIDs, "reject-id", "answer this order `id` 422 (repeatable)")
	looseAck := fs.String("loose-ack", "", "replace ack true by `1|ok`")
	holdNext := fs.Int("hold-next", 0, "commit the next `N` new orders, then never answer them")
	busyMS := fs.Int64("busy-timeout-ms", 5000, "SQLite busy timeout in `ms`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: receiver --db FILE [--addr 127.0.0.1:0] [--fail-next N] [--reject-id ID]... [--loose-ack 1|ok] [--hold-next N] [--busy-timeout-ms 5000]")
			fs.PrintDefaults()
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *db == "" {
		return usageError{errors.New("missing required flag --db")}
	}
	if *busyMS < 1 || *busyMS > 86400000 {
		return fmt.Errorf("%w: --busy-timeout-ms must be from 1 to 86400000", receiver.ErrInvalid)
	}

	rcv, err := receiver.Open(*db, receiver.Options{
		BusyTimeout: time.Duration(*busyMS) * time.Millisecond,
		Log:         stdout,
		Faults: receiver.Faults{
			FailNext:  *failNext,
			RejectIDs: rejectIDs,
			LooseAck:  *looseAck,
			HoldNext:  *holdNext,
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		rcv.Close()
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           rcv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(stderr, "receiver: ", 0),
	}
	srv.RegisterOnShutdown(rcv.ReleaseHeld)
	if _, err := fmt.Fprintf(stdout, "listening on %s\n", ln.Addr()); err != nil {
		ln.Close()
		rcv.Close()
		return fmt.Errorf("announce: %w", err)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		rcv.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if shutErr != nil {
		srv.Close()
	}
	<-served
	if err := rcv.Close(); err != nil {
		return err
	}
	if shutErr != nil {
		return fmt.Errorf("shutdown: %w", shutErr)
	}
	return nil
}
