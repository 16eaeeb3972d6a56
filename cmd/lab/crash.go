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

	"snacklab/internal/cliflag"
	"snacklab/internal/crash"
	"snacklab/internal/isolate"
	"snacklab/internal/powercut"
	"snacklab/labsteps/result"
	"snacklab/queue"
)

const crashUsage = `usage: lab crash [flags]

Kills each program of the order story (queuectl enqueue, sender run-once, the
receiver handling a POST, queuectl redrive, queuectl finish) at every crash
point in turn: each fsync/fdatasync, each write to a SQLite file, each socket
send and the journal's removal, counted across the process's threads. After
each kill it restarts what the story needs, drains the queue and checks the
invariants; then a random soak SIGKILLs senders, the receiver, enqueues and
redrives. Needs ptrace (docs/crash.md). Exit 0: no violation; 1: some.
--batch N runs the sender story (N orders, one sender run-once --batch N)
and the soak's senders in batched delivery.

With --power-cut it runs each program once, recording what it does to its
files, builds the states a power cut before each sync or answer may leave
(unsynced writes dropped, torn or reordered; directory changes lost until the
directory is synced), restarts the programs on each and checks the same
invariants plus what their answers promised. --budget full builds many more
states; --barrier B --state S replays one.

flags:
`

func runCrash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseCrashFlags(args, stdout)
	if err != nil || f == nil { // f nil: -h was answered
		return err
	}
	cfg := f.cfg
	if cfg.Bin, err = resolveBin(cfg.Bin); err != nil {
		var u usageErr
		if errors.As(err, &u) {
			return usageErr{"crash: " + u.msg}
		}
		return err
	}
	// Check the output paths before minutes of work.
	if err := checkOutputs(map[string]string{"results": f.results, "junit": f.junit, "html": f.html, "json": f.jsonOut}); err != nil {
		return err
	}
	tty := false
	if file, ok := stderr.(*os.File); ok {
		if fi, err := file.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	cfg.Progress = crashProgress(f.verbose, tty, stdout, stderr)
	outs := crashOutputs{stdout: stdout, results: f.results, junit: f.junit, html: f.html, json: f.jsonOut}
	if f.powerCut {
		pc := crash.PowerCutConfig{Bin: cfg.Bin, Work: cfg.Work, Keep: cfg.Keep, Programs: cfg.Programs,
			Budget: powercut.Budgets[f.budget], Seed: cfg.Seed, Barrier: f.barrier, State: f.state, Progress: cfg.Progress, Judged: cfg.Judged}
		fmt.Fprintf(stdout, "snacklab lab crash --power-cut: %s (budget %s, seed %d), graded against %s\n", cfg.Bin, f.budget, cfg.Seed, result.ContractText)
		return runPowerCut(ctx, pc, outs, tty, stderr)
	}
	batch := ""
	if cfg.Batch > 1 {
		batch = fmt.Sprintf(", senders --batch %d", cfg.Batch)
	}
	fmt.Fprintf(stdout, "snacklab lab crash: %s (soak seed %d, %d kills%s), graded against %s\n", cfg.Bin, cfg.Seed, cfg.Kills, batch, result.ContractText)
	rep, err := crash.Run(ctx, cfg)
	if errors.Is(err, crash.ErrNoTracing) {
		return skippedCrash(err, stderr)
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
	if err := outs.write(rep.Result(), rep.TookS, rep.WriteHTML, rep.WriteJSON); err != nil {
		return err
	}
	if !rep.OK {
		return failed{len(rep.Violations), len(rep.Points)} // the report said which
	}
	return nil
}

// crashFlags are lab crash's flags, parsed and checked.
type crashFlags struct {
	cfg                           crash.Config
	results, junit, html, jsonOut string
	verbose, powerCut             bool
	budget                        string
	barrier, state                int
	judgedUID, judgedGID          int
}

// parseCrashFlags parses and checks lab crash's flags before any work; it
// returns nil, nil when it printed the help.
func parseCrashFlags(args []string, stdout io.Writer) (*crashFlags, error) {
	var f crashFlags
	var programs string
	cfg := &f.cfg
	fs := flag.NewFlagSet("lab crash", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Bin, "bin", "", "directory holding queuectl, sender and receiver (default: the directory of this program)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "the soak's seed (with --power-cut: the states' samples); the same seed replays the same plan (default: from the clock, printed)")
	fs.IntVar(&cfg.Kills, "kills", 20, "SIGKILLs in the random soak (0: no soak; the long form is 1000)")
	fs.StringVar(&programs, "program", "", "enumerate only these `programs` (comma-separated: "+strings.Join(crash.Programs, ",")+"; none: the soak alone)")
	fs.IntVar(&cfg.Point, "at", 0, "replay crash point `N` of the one --program, keeping its work dir")
	fs.IntVar(&cfg.Batch, "batch", 1, "run the sender story and the soak's senders with sender --batch `N` (batched delivery, CONTRACT.md §4.batch; 1: one job at a time)")
	fs.StringVar(&f.results, "results", "", "write Gradescope's results.json to this `file`")
	fs.StringVar(&f.junit, "junit", "", "write JUnit XML to this `file`")
	fs.StringVar(&f.html, "html", "", "write an HTML report with the picture of the crash points to this `file`")
	fs.StringVar(&f.jsonOut, "json", "", "write the whole report as JSON to this `file` (- for stdout)")
	fs.StringVar(&cfg.Work, "work", "", "parent `dir` of the work dir (default: the system temp dir)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work dir (every crash point's files and logs)")
	fs.BoolVar(&f.verbose, "v", false, "print a line per crash point (per power-cut state)")
	fs.BoolVar(&f.powerCut, "power-cut", false, "check every state a power cut may leave instead of crash points and the soak")
	fs.StringVar(&f.budget, "budget", powercut.Small.Name, "with --power-cut: the `budget` of states per barrier (small: CI and grading; full)")
	fs.IntVar(&f.barrier, "barrier", 0, "with --power-cut: replay only barrier `B` of the one --program (keeps its work dir)")
	fs.IntVar(&f.state, "state", 0, "with --power-cut --barrier B: replay only state `S` of it")
	cliflag.IntVar(fs, &f.judgedUID, "judged-uid", -1, fmt.Sprintf("run every program under test as this `uid`, as lab run does (the lab must be root with CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_KILL, CAP_SYS_PTRACE; grading containers use %d)", isolate.JudgedUID))
	cliflag.IntVar(fs, &f.judgedGID, "judged-gid", -1, "with --judged-uid: the programs' `gid` (default: the uid)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, crashUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, nil
		}
		return nil, usageErr{fmt.Sprintf("crash: %v. Try: lab crash -h", err)}
	}
	if fs.NArg() > 0 {
		return nil, usageErr{fmt.Sprintf("crash: unexpected %q. Try: lab crash --program sender --at 3", fs.Arg(0))}
	}
	if programs != "" {
		cfg.Programs = strings.Split(programs, ",")
		for _, p := range cfg.Programs {
			if !slices.Contains(crash.Programs, p) && !(p == "none" && len(cfg.Programs) == 1) {
				return nil, usageErr{fmt.Sprintf("crash: --program %s: want %s, or none. Try: lab crash --program receiver", p, strings.Join(crash.Programs, ","))}
			}
		}
	}
	if cfg.Point > 0 && (len(cfg.Programs) != 1 || cfg.Programs[0] == "none") {
		return nil, usageErr{"crash: --at replays a crash point of one program. Try: lab crash --program finish --at 3"}
	}
	if cfg.Batch < 1 || cfg.Batch > queue.MaxBatch {
		return nil, usageErr{fmt.Sprintf("crash: --batch %d: want 1 to %d. Try: lab crash --program sender --batch 3", cfg.Batch, queue.MaxBatch)}
	}
	if cfg.Kills < 0 || cfg.Point < 0 {
		return nil, usageErr{"crash: --kills and --at must be >= 0. Try: lab crash --kills 1000"}
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() % 1_000_000
	}
	var err error
	if cfg.Judged, err = judgedIDs(f.judgedUID, f.judgedGID, "crash"); err != nil {
		var u usageErr
		if errors.As(err, &u) {
			return nil, usageErr{"crash: " + u.msg}
		}
		return nil, err
	}
	return &f, checkPowerCutFlags(fs, f.powerCut, f.budget, f.barrier, f.state, cfg.Programs)
}

// crashProgress prints the program lines, and the per-point lines on one
// overwritten line of a terminal (all of them with -v).
func crashProgress(verbose, tty bool, stdout, stderr io.Writer) func(string) {
	return func(line string) {
		switch {
		case verbose:
			fmt.Fprintln(stdout, line)
		case strings.Contains(line, "#") || strings.HasPrefix(line, "crash: soak: ") || strings.Contains(line, " state "):
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
}

// skippedCrash reports that tracing is not allowed here: a skip, or with
// SNACKLAB_REQUIRE_STRACE (CI) a failure.
func skippedCrash(err error, stderr io.Writer) error {
	fmt.Fprintf(stderr, "lab crash: SKIPPED: %v\n  (docs/crash.md: run it where ptrace is allowed; CI sets SNACKLAB_REQUIRE_STRACE=1 and fails here)\n", err)
	if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
		return err
	}
	return nil
}
