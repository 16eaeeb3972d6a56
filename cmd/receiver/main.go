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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"snacklab/internal/cliflag"
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
	case errors.Is(err, receiver.ErrInvalid), errors.Is(err, cliflag.ErrRange):
		return 3
	case errors.Is(err, errMissingDir):
		return 4
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

// errMissingDir is exit 4: the receiver creates its file, not its directory.
var errMissingDir = errors.New("database directory missing")

// Ranges of the numeric flags (CONTRACT.md §5).
const (
	maxFaultCount    = 1_000_000
	maxBusyTimeoutMs = 86_400_000
)

// run is main without the process: testable, and every error comes back for
// main to print and map once.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one-line errors only; -h prints usage itself
	db := fs.String("db", "", "receiver database `file` (created if missing, not its directory; required)")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address`, HOST:PORT with PORT 0 to 65535 (0: any free port)")
	failNext := cliflag.NewInt(fs, "fail-next", 0, 0, maxFaultCount, "answer the next N orders 503")
	var rejectIDs idList
	fs.Var(&rejectIDs, "reject-id", "answer this order `id` 422 (repeatable)")
	looseAck := fs.String("loose-ack", "", "replace ack true by `1|ok`")
	holdNext := cliflag.NewInt(fs, "hold-next", 0, 0, maxFaultCount, "commit the next N new orders, then hold their answers until the client goes away")
	busyMS := cliflag.NewInt(fs, "busy-timeout-ms", 5000, 1, maxBusyTimeoutMs, "SQLite busy timeout, ms")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: receiver --db FILE [--addr 127.0.0.1:0] [--fail-next N] [--reject-id ID]... [--loose-ack 1|ok] [--hold-next N] [--busy-timeout-ms 5000]\nflags:")
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
	// Every flag is checked before any file is touched or port taken: a
	// refused start creates nothing.
	if err := cliflag.Check(fs); err != nil {
		return err
	}
	if err := checkAddr(*addr); err != nil {
		return err
	}
	opts := receiver.Options{
		BusyTimeout: time.Duration(busyMS.Get()) * time.Millisecond,
		Log:         stdout,
		Faults: receiver.Faults{
			FailNext:  int(failNext.Get()),
			RejectIDs: rejectIDs,
			LooseAck:  *looseAck,
			HoldNext:  int(holdNext.Get()),
		},
	}
	// The fault flags are values too: an invalid one is exit 3 even when
	// the directory is missing (CONTRACT §6.codes: the first row that
	// applies).
	if err := opts.Faults.Validate(); err != nil {
		return err
	}
	if err := checkDBPath(*db); err != nil {
		return err
	}
	// Listen before opening: a port that is taken must not leave a new
	// database file behind. Open checks the faults before it creates the file.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	rcv, err := receiver.Open(*db, opts)
	if err != nil {
		ln.Close()
		return err
	}
	srv := rcv.Server(log.New(stderr, "receiver: ", 0), receiver.DefaultTimeouts)
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

// checkAddr refuses an address net.Listen could not mean, so that a typo is
// a usage answer rather than a failed start: HOST:PORT, PORT plain decimal
// from 0 to 65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: --addr %q: want HOST:PORT, e.g. 127.0.0.1:0", receiver.ErrInvalid, addr)
	}
	if p, err := cliflag.ParseInt(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%w: --addr %q: port %q: want 0 to 65535 in plain decimal", receiver.ErrInvalid, addr, port)
	}
	if strings.ContainsAny(host, " \t/") {
		return fmt.Errorf("%w: --addr %q: host %q is not a host name or IP address", receiver.ErrInvalid, addr, host)
	}
	return nil
}

// checkDBPath gives a directory, or a file in a missing directory, its
// contract code and a sentence, instead of SQLite's "unable to open".
func checkDBPath(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: --db %s is a directory, not a database file", receiver.ErrNotDatabase, path)
	case err == nil:
		return nil
	}
	dir := filepath.Dir(path)
	if di, derr := os.Stat(dir); derr != nil || !di.IsDir() {
		return fmt.Errorf("%w: --db %s: directory %s does not exist (the receiver creates its file, not its directory)", errMissingDir, path, dir)
	}
	return nil
}
