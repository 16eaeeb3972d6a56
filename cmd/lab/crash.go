package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"snacklab/internal/crash"
	"snacklab/labsteps"
)

const crashUsage = `usage: lab crash [flags]

Kills each program of the order story (queuectl enqueue, sender run-once, the
receiver handling a POST, queuectl redrive, queuectl finish) at every crash
point in turn: each fsync/fdatasync, each write to a SQLite file, each socket
send and the journal's removal, counted across the process's threads. After
each kill it restarts what the story needs, drains the queue and checks the
invariants; then a random soak SIGKILLs senders, the receiver, enqueues and
redrives. Needs ptrace (docs/crash.md). Exit 0: no violation; 1: some.

flags:
`

func runCrash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg crash.Config
	var results, junit, html, jsonOut, programs string
	var verbose bool
	fs := flag.NewFlagSet("lab crash", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Bin, "bin", "", "directory holding queuectl, sender and receiver (default: the directory of this program)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "the soak's seed; the same seed replays the same plan of kills (default: from the clock, printed)")
	fs.IntVar(&cfg.Kills, "kills", 20, "SIGKILLs in the random soak (0: no soak; the long form is 1000)")
	fs.StringVar(&programs, "program", "", "enumerate only these `programs` (comma-separated: "+strings.Join(crash.Programs, ",")+"; none: the soak alone)")
	fs.IntVar(&cfg.Point, "at", 0, "replay crash point `N` of the one --program, keeping its work dir")
	fs.StringVar(&results, "results", "", "write Gradescope's results.json to this `file`")
	fs.StringVar(&junit, "junit", "", "write JUnit XML to this `file`")
	fs.StringVar(&html, "html", "", "write an HTML report with the picture of the crash points to this `file`")
	fs.StringVar(&jsonOut, "json", "", "write the whole report as JSON to this `file` (- for stdout)")
	fs.StringVar(&cfg.Work, "work", "", "parent `dir` of the work dir (default: the system temp dir)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work dir (every crash point's files and logs)")
	fs.BoolVar(&verbose, "v", false, "print a line per crash point")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, crashUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return usageErr{fmt.Sprintf("crash: %v. Try: lab crash -h", err)}
	}
	if fs.NArg() > 0 {
		return usageErr{fmt.Sprintf("crash: unexpected %q. Try: lab crash --program sender --at 3", fs.Arg(0))}
	}
	if programs != "" {
		cfg.Programs = strings.Split(programs, ",")
		for _, p := range cfg.Programs {
			if !slices.Contains(crash.Programs, p) && !(p == "none" && len(cfg.Programs) == 1) {
				return usageErr{fmt.Sprintf("crash: --program %s: want %s, or none. Try: lab crash --program receiver", p, strings.Join(crash.Programs, ","))}
			}
		}
	}
	if cfg.Point > 0 && (len(cfg.Programs) != 1 || cfg.Programs[0] == "none") {
		return usageErr{"crash: --at replays a crash point of one program. Try: lab crash --program finish --at 3"}
	}
	if cfg.Kills < 0 || cfg.Point < 0 {
		return usageErr{"crash: --kills and --at must be >= 0. Try: lab crash --kills 1000"}
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() % 1_000_000
	}
	var err error
	if cfg.Bin, err = resolveBin(cfg.Bin); err != nil {
		var u usageErr
		if errors.As(err, &u) {
			return usageErr{"crash: " + u.msg}
		}
		return err
	}
	// Check the output paths before minutes of work.
	if err := checkOutputs(map[string]string{"results": results, "junit": junit, "html": html, "json": jsonOut}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "snacklab lab crash: %s (soak seed %d, %d kills)\n", cfg.Bin, cfg.Seed, cfg.Kills)
	tty := false
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	cfg.Progress = func(line string) {
		switch {
		case verbose:
			fmt.Fprintln(stdout, line)
		case strings.Contains(line, "#") || strings.HasPrefix(line, "crash: soak: "):
			if tty { // one line, overwritten
				fmt.Fprintf(stderr, "\r\033[K%s", line)
			}
		default:
			if tty {
				fmt.Fprint(stderr, "\r\033[K")
			}
			fmt.Fprintln(stdout, line)
		}
	}
	rep, err := crash.Run(ctx, cfg)
	if errors.Is(err, crash.ErrNoTracing) {
		fmt.Fprintf(stderr, "lab crash: SKIPPED: %v\n  (docs/crash.md: run it where ptrace is allowed; CI sets SNACKLAB_REQUIRE_STRACE=1 and fails here)\n", err)
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			return err
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	// The program and soak lines came as progress; the rest now.
	if err := rep.WriteTail(stdout); err != nil {
		return err
	}
	res := rep.Result()
	took := time.Duration(rep.TookS * float64(time.Second))
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		if path == "-" {
			return fn(stdout)
		}
		return labsteps.WriteFile(path, fn)
	}
	if err := errors.Join(
		write(results, func(w io.Writer) error { return labsteps.WriteGradescope(w, []labsteps.Result{res}, took) }),
		write(junit, func(w io.Writer) error { return labsteps.WriteJUnit(w, []labsteps.Result{res}, took) }),
		write(html, rep.WriteHTML),
		write(jsonOut, rep.WriteJSON),
	); err != nil {
		return err
	}
	if !rep.OK {
		return failed{len(rep.Violations), len(rep.Points)} // the report said which
	}
	return nil
}
