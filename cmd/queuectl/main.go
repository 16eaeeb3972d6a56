// Command queuectl is the operator's and the lab's hand on the queue file:
// every transition of CONTRACT.md §2 as a verb, with --json for programs.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"snacklab/internal/exitcode"
	"snacklab/queue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// report prints err as one line and returns its exit code.
func report(err error, stderr io.Writer) int {
	code := exitcode.Code(err)
	if err != nil && code != exitcode.Empty && code != exitcode.NotApplied {
		fmt.Fprintf(stderr, "queuectl: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return code
}

// verb is one subcommand. setup declares its flags on fs; the returned
// action runs after parsing, with the shared flags resolved in env.
type verb struct {
	summary  string
	needsDB  bool
	required []string // flags that must be given; checked before the file is opened
	// positional names the flag one bare argument stands for, so that
	// `queuectl investigate o-1 --note T-1` reads as it is spoken.
	positional string
	setup      func(fs *flag.FlagSet) func(ctx context.Context, env *env) error
}

// verbs is filled by each file's init, so operator verbs live beside the
// lab verbs without one file knowing them all.
var verbs = map[string]verb{}

// env is what every verb gets: the shared flags, resolved.
type env struct {
	q      *queue.Queue
	now    int64
	json   bool
	stdout io.Writer
	stderr io.Writer
	dbPath string
}

// out prints v as one JSON line with --json, else the text from human().
func (e *env) out(v any, human func(w io.Writer)) error {
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false) // alerts read "3 dead > 2", not "\u003e"
		return enc.Encode(v)
	}
	human(e.stdout)
	return nil
}

func usage() string {
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: queuectl VERB --db FILE [flags]\nverbs:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-12s %s\n", n, verbs[n].summary)
	}
	b.WriteString("Try: queuectl VERB -h\n")
	return b.String()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage())
		if len(args) == 0 {
			return exitcode.Usagef("no verb given")
		}
		return nil
	}
	name := args[0]
	v, ok := verbs[name]
	if !ok {
		return exitcode.Usagef("unknown verb %q. Try: queuectl help", name)
	}
	fs := flag.NewFlagSet("queuectl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, on one line, by report
	dbPath := fs.String("db", "", "queue database file (required)")
	nowMs := fs.Int64("now-ms", 0, "injected clock, ms since the epoch (default: the real clock)")
	busy := fs.Int64("busy-timeout-ms", 5000, "how long to wait for another process's lock")
	asJSON := fs.Bool("json", false, "print one JSON object")
	action := v.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintf(stdout, "usage: queuectl %s [flags]: %s\n", name, v.summary)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return exitcode.Usagef("%s: %v. Try: queuectl %s -h", name, err, name)
	}
	if fs.NArg() > 0 && v.positional != "" {
		if f := fs.Lookup(v.positional); f != nil && f.Value.String() == f.DefValue {
			fs.Set(v.positional, fs.Arg(0))
			if err := fs.Parse(fs.Args()[1:]); err != nil {
				return exitcode.Usagef("%s: %v. Try: queuectl %s -h", name, err, name)
			}
		}
	}
	if fs.NArg() > 0 {
		return exitcode.Usagef("%s: unexpected argument %q. Try: queuectl %s -h", name, fs.Arg(0), name)
	}
	for _, r := range v.required {
		if !isSet(fs, r) {
			return exitcode.Usagef("%s: --%s is required. Try: queuectl %s -h", name, r, name)
		}
	}
	e := &env{now: *nowMs, json: *asJSON, stdout: stdout, stderr: stderr, dbPath: *dbPath}
	switch {
	case !isSet(fs, "now-ms"):
		e.now = time.Now().UnixMilli()
	case e.now < 0:
		return fmt.Errorf("%w: --now-ms %d: want ms since the epoch, >= 0", queue.ErrInvalid, *nowMs)
	}
	if *busy < 0 {
		return fmt.Errorf("%w: --busy-timeout-ms %d: want >= 0", queue.ErrInvalid, *busy)
	}
	if v.needsDB {
		if *dbPath == "" {
			return exitcode.Usagef("%s: --db is required. Try: queuectl %s --db queue.db -h", name, name)
		}
		q, err := queue.Open(*dbPath, queue.Options{Create: name == "init", BusyTimeout: time.Duration(*busy) * time.Millisecond})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer q.Close()
		e.q = q
	}
	if err := action(ctx, e); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// isSet reports whether name was given on the command line, so a flag's
// zero value can still be asked for (--max-dead 0, --older-than 0s).
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
