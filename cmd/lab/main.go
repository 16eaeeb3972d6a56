// Command lab runs snacklab's numbered lab steps against the three
// executables of an implementation (queuectl, sender, receiver) and reports
// PASS/FAIL per step, with what was expected, what was observed and why it
// matters. `./run-lab.sh` builds the reference and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"snacklab/internal/cliflag"
	"snacklab/internal/isolate"
	"snacklab/labsteps"
	"snacklab/labsteps/harness"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

func main() {
	ctx, stop := interruptible()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) && ctx.Err() != nil {
		// Whatever the run returned, it was cut short: say so, and exit as
		// a shell expects of a program a signal stopped (130, 143).
		fmt.Fprintf(os.Stderr, "lab: interrupted by %v: what ran was not judged, and its work dirs were removed\n", sig.Signal)
		os.Exit(128 + int(sig.Signal))
	}
	if err != nil {
		var f failed
		if !errors.As(err, &f) {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		}
		if errors.As(err, &usageErr{}) {
			os.Exit(2)
		}
		if errors.As(err, &notGradedErr{}) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

// interrupted is the cause of a context a signal ended.
type interrupted struct{ Signal syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.Signal.String() }

// interruptible is a context that SIGINT or SIGTERM cancels, with the
// signal as its cause (interrupted): every step and build then stops, and
// what it reported says INTERRUPTED, never TIMEOUT or FAIL.
func interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				cancel(interrupted{n})
			}
		case <-done:
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel(nil) }
}

// failed is the error of a run in which some step failed; the steps have
// already said why.
type failed struct{ n, of int }

func (f failed) Error() string { return fmt.Sprintf("%d of %d steps failed", f.n, f.of) }

type usageErr struct{ msg string }

// notGradedErr: some submission has no grade because the grader could not
// judge a part of it (exit 3).
type notGradedErr struct{ msg string }

func (n notGradedErr) Error() string { return n.msg }

func (u usageErr) Error() string { return u.msg }

const usage = `usage: lab [run] [flags] [STEPS…]
       lab grade [flags] SUBMISSION…     grade a cohort (docs/grading.md; lab grade -h)
       lab merge --out DIR SHARDDIR…     join the results of lab grade --shard i/n
       lab tables --out DIR              rebuild grades.{csv,md,html} from the results in DIR
       lab starter --out DIR             write a learner's copy with the solutions taken out
       lab selftest                      prove the steps: reference passes, starter and every mutant fail
       lab crash [flags]                 kill each program at every crash point, then soak (docs/crash.md)
       lab model --bin DIR [flags]       random queuectl sequences checked against a model of the contract, shrunk on failure
       lab autograder PLATFORM --out X   package the lab for gradescope, prairielearn or classroom (docs/grading.md)

Runs the numbered lab steps against an implementation's executables.
STEPS: numbers or names: 8, crash, 3-5, claim-redrive, 1,4 (default: all).
Flags may come before or after them. A first argument naming a subcommand is that
subcommand: step 8 by name is "lab run crash" (run-lab.sh says run for you).

flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			args = args[1:]
		case "starter":
			return runStarter(ctx, args[1:], stdout, stderr)
		case "grade":
			return runGrade(ctx, args[1:], stdout, stderr)
		case "merge":
			return runMerge(ctx, args[1:], stdout, stderr)
		case "tables":
			return runTables(ctx, args[1:], stdout, stderr)
		case "selftest":
			return runSelftest(ctx, args[1:], stdout, stderr)
		case "crash":
			return runCrash(ctx, args[1:], stdout, stderr)
		case "model":
			return runModel(ctx, args[1:], stdout, stderr)
		case "autograder":
			return runAutograder(ctx, args[1:], stdout, stderr)
		case harness.JudgedExecCommand, harness.JudgedSQLCommand, harness.JudgedKillCommand:
			// A step of a traced start (harness.Judged.Exec), or the
			// harness's hand on a program's SQLite file (harness.SQLHand),
			// or the end of every process of a judged identity
			// (harness.Judged.KillAll): all run as the judged.
			_, err := harness.Helper(args, os.Stdin, stdout)
			return err
		case "help", "-h", "--help":
			printUsage(stdout)
			return nil
		}
	}
	return runSteps(ctx, args, stdout, stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	fs := newFlags(&options{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

type options struct {
	bin, results, junit, html, workRoot string
	jsonOut, last                       string
	keep, verbose, timing               bool
	timeout                             time.Duration
	parallel, repeat                    int
	judgedUID, judgedGID                int
}

func newFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("lab run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.bin, "bin", "", "directory holding queuectl, sender and receiver (default: the directory of this program)")
	fs.StringVar(&o.results, "results", "", "write Gradescope's results.json to this `file`")
	fs.StringVar(&o.junit, "junit", "", "write JUnit XML to this `file`")
	fs.StringVar(&o.html, "html", "", "write an HTML report with step 8's timeline to this `file`")
	fs.StringVar(&o.jsonOut, "json", "", "write the results in the lab's own JSON form (snacklab-results/1: every check, part and event) to this `file`")
	fs.StringVar(&o.last, "last", "", "the lab's JSON results of your last run (`file`): read to say what passes now that did not, then replaced by this run's; \"none\": neither (default: "+lastName+" in the --bin dir, when it can be written)")
	fs.StringVar(&o.workRoot, "work", "", "parent `dir` of the steps' work dirs (default: the system temp dir)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dirs (logs, queue files) of passing steps too")
	fs.BoolVar(&o.verbose, "v", false, "print each step's story as it ends, every failed check in full, every command, line and check (default: a line per step, then the summary)")
	fs.BoolVar(&o.timing, "timing", false, "after the run, measure the floor (the cost of the process starts and commits it needed) and the wall time against it")
	fs.DurationVar(&o.timeout, "timeout", 0, "time limit of one step (default: derived from the calibration, at least 60s)")
	cliflag.IntVar(fs, &o.parallel, "parallel", 0, "steps run at once (default: all selected)")
	cliflag.IntVar(fs, &o.repeat, "repeat", 1, "run the selection this many times; reports describe the last run")
	cliflag.IntVar(fs, &o.judgedUID, "judged-uid", -1, fmt.Sprintf("run the programs under test as another `uid`: calibration's as it, step n's as uid+n, each step's ended with it, setsid or not (the lab must be root with CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_KILL; grading containers use %d; give uids no other process uses)", isolate.JudgedUID))
	cliflag.IntVar(fs, &o.judgedGID, "judged-gid", -1, "with --judged-uid: the programs' `gid` (default: the uid; step n's gid+n)")
	return fs
}

// parseInterleaved parses flags that may come before, between or after the
// step arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func runSteps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlags(&o)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("%v. Try: lab help", err)}
	}
	steps, err := labsteps.Select(pos)
	if err != nil {
		return usageErr{fmt.Sprintf("%v. Try: lab run 8, or lab run crash", err)}
	}
	if o.repeat < 1 {
		return usageErr{"--repeat must be at least 1. Try: lab run --repeat 200"}
	}
	outs := map[string]string{"results": o.results, "junit": o.junit, "html": o.html, "json": o.jsonOut}
	if o.last != "none" {
		outs["last"] = o.last
	}
	if err := checkOutputs(outs); err != nil {
		return err
	}
	if o.bin, err = resolveBin(o.bin); err != nil {
		return err
	}
	cfg := labsteps.Config{Bin: o.bin, WorkRoot: o.workRoot, Keep: o.keep, StepTimeout: o.timeout, Parallel: o.parallel}
	if cfg.Judged, err = judgedOf(o); err != nil {
		return err
	}
	lastPath, last, err := readLast(o, stderr)
	if err != nil {
		return err
	}
	cal := calibrate(ctx, cfg, stdout)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	cfg.Calibration = &cal

	results, took, walls, failedRuns := runRepeated(ctx, o, cfg, steps, last, stdout)
	if o.repeat > 1 {
		fmt.Fprintf(stdout, "%d runs, %d with a failed step; wall time median %.3fs, min %.3fs, max %.3fs\n",
			len(walls), failedRuns, median(walls).Seconds(), minD(walls).Seconds(), maxD(walls).Seconds())
	}
	if o.timing {
		if err := reportFloor(ctx, cfg, results, median(walls), len(walls), stdout); err != nil {
			fmt.Fprintf(stderr, "lab: timing: %v\n", err)
		}
	}
	if err := writeReports(o, results, took); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	saveLast(lastPath, last, results, o.last != "", stderr)
	if n := countFailed(results); n > 0 || failedRuns > 0 {
		return failed{n, len(results)}
	}
	return nil
}

// runRepeated runs the steps o.repeat times, or until ctx ends, with a
// line per run. It returns the last run's results and wall time (what the
// reports describe), every run's wall time, and how many runs had a
// failed step.
func runRepeated(ctx context.Context, o options, cfg labsteps.Config, steps []labsteps.Step, last []result.Result, stdout io.Writer) (results []result.Result, took time.Duration, walls []time.Duration, failedRuns int) {
	for i := 0; i < o.repeat; i++ {
		if ctx.Err() != nil {
			break
		}
		quiet := o.repeat > 1
		if !quiet {
			fmt.Fprintf(stdout, "snacklab lab: %d step(s) against %s, graded against %s\n", len(steps), o.bin, result.ContractText)
		}
		t0 := time.Now()
		results = labsteps.RunSteps(ctx, cfg, steps, stepPrinter(stdout, quiet, o.verbose, last))
		took = time.Since(t0)
		walls = append(walls, took)
		n := countFailed(results)
		if n > 0 {
			failedRuns++
		}
		if quiet {
			fmt.Fprintf(stdout, "run %d/%d: %d/%d passed in %.3fs%s\n", i+1, o.repeat, len(results)-n, len(results), took.Seconds(), timedOutNote(results))
		} else {
			printSummary(stdout, o, results, last)
			fmt.Fprintf(stdout, "%d/%d steps passed in %.2fs%s\n", len(results)-n, len(results), took.Seconds(), timedOutNote(results))
		}
	}
	return results, took, walls, failedRuns
}

// stepPrinter prints each step as it ends: a line with its mark and its
// parts' marks (report.StepLine: a part that passes now and did not in the
// last run is marked +). With verbose (or in a repeated run, quiet, which
// leaves out the steps that passed) it prints today's full story instead:
// the verdict, why it failed or where its work dir was kept, and with
// verbose every command, line and check.
func stepPrinter(stdout io.Writer, quiet, verbose bool, last []result.Result) func(result.Result) {
	return func(r result.Result) {
		if quiet && r.Pass {
			return
		}
		if !quiet && !verbose {
			_, newly, _ := report.Summary{Results: []result.Result{r}, Last: last}.Progress()
			fmt.Fprintln(stdout, report.StepLine(r, newly))
			if r.Pass && r.Dir != "" {
				fmt.Fprintf(stdout, "      kept: %s (logs, queue files, lab.log)\n", r.Dir)
			}
			return
		}
		fmt.Fprintln(stdout, r.Summary())
		if d := r.Detail(); d != "" {
			fmt.Fprint(stdout, indent(d, "      "))
		} else if r.Dir != "" {
			fmt.Fprintf(stdout, "      kept: %s (logs, queue files, lab.log)\n", r.Dir)
		}
		if verbose {
			fmt.Fprint(stdout, indent(r.Narrative, "    │ "))
		}
	}
}

// calibrate measures how long the implementation takes to start and answer,
// which every wait of the run is derived from, and says so.
func calibrate(ctx context.Context, cfg labsteps.Config, stdout io.Writer) result.Calibration {
	cal := cfg.Calibrate(ctx)
	l := result.DeriveLimits(cal, harness.LoadPerCore(), cfg.StepTimeout)
	fmt.Fprintf(stdout, "calibration: %s\ncalibration: each wait %v, step limit %v (floors ×%.1f for load)\n", cal, l.Wait, l.Step, l.Scale)
	return cal
}

// timedOutNote says how many steps were not judged rather than failed.
func timedOutNote(rs []result.Result) string {
	n := result.CountNotJudged(rs)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d not judged: TIMEOUT, INTERRUPTED or ERROR is not a wrong answer; re-run, on a quieter machine if it timed out)", n)
}

func countFailed(rs []result.Result) int {
	n := 0
	for _, r := range rs {
		if !r.Pass {
			n++
		}
	}
	return n
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}

// judgedOf is the identity --judged-uid and --judged-gid name, with this
// lab as the step that drops to it before a traced program (nil: none).
func judgedOf(o options) (*harness.Judged, error) {
	return judgedIDs(o.judgedUID, o.judgedGID, "run")
}

// judgedIDs is judgedOf for the ids of any subcommand's --judged-uid and
// --judged-gid (-1: not given); sub names it in the usage errors.
func judgedIDs(uid, gid int, sub string) (*harness.Judged, error) {
	if uid < 0 {
		if gid >= 0 {
			return nil, usageErr{fmt.Sprintf("--judged-gid needs --judged-uid. Try: lab %s --judged-uid %d", sub, isolate.JudgedUID)}
		}
		return nil, nil
	}
	if uid == 0 || uid > 1<<31 || gid > 1<<31 {
		return nil, usageErr{fmt.Sprintf("--judged-uid %d: want a non-root uid. Try: lab %s --judged-uid %d", uid, sub, isolate.JudgedUID)}
	}
	if gid < 0 {
		gid = uid
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--judged-uid: the lab's own path: %w", err)
	}
	// Inside the grading container the account files are the image's
	// (harness.Accounts), so strace can run a traced program by name, and
	// the root directory is made cheap for the judged to look paths up in.
	openRoot()
	return &harness.Judged{UID: uint32(uid), GID: uint32(gid), Exec: []string{self, harness.JudgedExecCommand},
		Accounts: os.Getenv(isolatedEnv) == "1"}, nil
}
