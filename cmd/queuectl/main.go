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

	"snacklab/internal/cliflag"
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
	// jsonUsage is the help of --json where the verb prints something
	// other than one JSON object ("" : "print one JSON object").
	jsonUsage string
	setup     func(fs *flag.FlagSet) func(ctx context.Context, env *env) error
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

// readOnly lists the verbs that never write: they open the file mode=ro,
// so a report cannot change what it reports on (not even a journal-mode
// switch or a version mark), and a file in the wrong journal mode is refused.
var readOnly = map[string]bool{"stats": true, "show": true, "dead": true, "alerts": true, "serve": true, "check": true}

// Ranges of the shared flags (CONTRACT.md §3).
const (
	maxBusyTimeoutMs = 86_400_000 // one day
)

// flags declares the shared flags and the verb's own on a new FlagSet.
func flags(name string, v verb) (fs *flag.FlagSet, dbPath *string, nowMs, busy *cliflag.Int, asJSON *bool, action func(context.Context, *env) error) {
	fs = flag.NewFlagSet("queuectl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, on one line, by report
	dbPath = fs.String("db", "", "queue database file (required)")
	nowMs = cliflag.NewInt(fs, "now-ms", 0, 0, cliflag.MaxExact, "injected clock, ms since the epoch (default: the real clock)")
	busy = cliflag.NewInt(fs, "busy-timeout-ms", 5000, 0, maxBusyTimeoutMs, "how long to wait for another process's lock, ms (0: 5000)")
	jsonUsage := v.jsonUsage
	if jsonUsage == "" {
		jsonUsage = "print one JSON object"
	}
	asJSON = fs.Bool("json", false, jsonUsage)
	action = v.setup(fs)
	return
}

// help prints one verb's usage and flags.
func help(w io.Writer, name string, v verb) {
	fs, _, _, _, _, _ := flags(name, v)
	fmt.Fprintf(w, "usage: queuectl %s --db FILE [flags]\n%s\nflags:\n", name, v.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 2 && args[0] == "help" {
			v, ok := verbs[args[1]]
			if !ok {
				return exitcode.Usagef("help: unknown verb %q. Try: queuectl help", args[1])
			}
			help(stdout, args[1], v)
			return nil
		}
		if len(args) == 0 {
			// A usage error: exit 2 prints nothing on stdout (CONTRACT §3),
			// so the usage goes to stderr with the error.
			fmt.Fprint(stderr, usage())
			return exitcode.Usagef("no verb given")
		}
		fmt.Fprint(stdout, usage())
		if len(args) > 2 {
			return exitcode.Usagef("help takes one verb. Try: queuectl help VERB")
		}
		return nil
	}
	name := args[0]
	v, ok := verbs[name]
	if !ok {
		return exitcode.Usagef("unknown verb %q. Try: queuectl help", name)
	}
	fs, dbPath, nowMs, busy, asJSON, action := flags(name, v)
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			help(stdout, name, v)
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
	// Every value's range is checked before the file is opened: a refused
	// command line must not touch the queue.
	if err := cliflag.Check(fs); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := checkValues(fs); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	e := &env{now: nowMs.Get(), json: *asJSON, stdout: stdout, stderr: stderr, dbPath: *dbPath}
	if !nowMs.Given() {
		e.now = time.Now().UnixMilli()
	}
	if v.needsDB {
		if *dbPath == "" {
			return exitcode.Usagef("%s: --db is required. Try: queuectl %s --db queue.db -h", name, name)
		}
		q, err := queue.Open(*dbPath, queue.Options{Create: name == "init", ReadOnly: readOnly[name],
			BusyTimeout: time.Duration(busy.Get()) * time.Millisecond})
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

// valueChecks are the forms CONTRACT.md §1 gives the string flags, checked
// with the integer ranges before the file is opened (§3: a bad value is
// invalid input, exit 3, even when the file is missing).
var valueChecks = map[string]func(string) error{
	"id":      func(s string) error { return queue.CheckID("id", s) },
	"owner":   func(s string) error { return queue.CheckID("owner", s) },
	"note":    queue.CheckNote,
	"outcome": func(s string) error { _, err := queue.ParseOutcome(s); return err },
}

// checkValues checks every string flag given on fs that has a form, in the
// order of the flags' names, and returns the first failure.
func checkValues(fs *flag.FlagSet) error {
	var first error
	fs.Visit(func(f *flag.Flag) {
		if c := valueChecks[f.Name]; c != nil && first == nil {
			first = c(f.Value.String())
		}
	})
	return first
}

// isSet reports whether name was given on the command line, so a flag's
// zero value can still be asked for (--max-dead 0, --older-than 0s).
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
