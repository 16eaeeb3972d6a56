package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"snacklab/internal/cliflag"
	"snacklab/internal/grade"
	"snacklab/internal/isolate"
)

const gradeUsage = `usage: lab grade [flags] SUBMISSION...

Grades a cohort. A SUBMISSION is a learner's copy of the module (a directory
with go.mod: built offline with a time limit) or a directory of executables
queuectl, sender and receiver (any language). Each step runs in its own
process group with a time limit; whatever a submission does, it costs only
its own steps. Flags may come before or after the submissions.

Writes, in --out DIR:
  DIR/NAME/results.json  Gradescope's format (points per step)
  DIR/NAME/junit.xml     JUnit XML;  DIR/NAME/report.html  the lab's report
  DIR/NAME/logs/         work dirs of failing steps;  DIR/NAME/bin/  the build
  DIR/grades.csv, grades.md, grades.html   the cohort: submission × step
  DIR/shard.json         which slice of which cohort (for lab merge)

Exit: 0 every submission graded (whatever its score); 2 a usage error, or some
SUBMISSION missing or not a submission (the others are still graded and it is
recorded with 0 points); 1 the grader itself failed or was interrupted.

flags:
`

const mergeUsage = `usage: lab merge --out DIR SHARDDIR...

Joins the output directories of ` + "`lab grade --shard i/n`" + ` runs of one cohort:
copies every submission's results into DIR and rebuilds grades.csv, grades.md
and grades.html from their results.json files. Refuses shards of different
cohorts, overlapping shards and missing shards.
`

type gradeOptions struct {
	out, points, shard, gocache, isolate string
	runs, jobs, parallel                 int
	timeout, buildTimeout                time.Duration
}

func newGradeFlags(o *gradeOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("lab grade", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "grades", "output `dir`")
	fs.StringVar(&o.points, "points", "", "points per step: `1=10,2=10,…` (steps not listed are not run) or a file of such pairs (default: all 8 steps, 12.5 each)")
	cliflag.IntVar(fs, &o.runs, "n", 1, "run each submission this many times; a step that passes in some runs and fails in others is flaky and scores 0")
	cliflag.IntVar(fs, &o.jobs, "jobs", runtime.NumCPU(), "submissions graded at once")
	cliflag.IntVar(fs, &o.parallel, "parallel", 0, "steps of one submission run at once (default: all)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "time limit of one step")
	fs.DurationVar(&o.buildTimeout, "build-timeout", 5*time.Minute, "time limit of one submission's go build")
	fs.StringVar(&o.gocache, "gocache", "", "GOCACHE for the builds (default: go's own)")
	fs.StringVar(&o.isolate, "isolate", "", "`docker`: run each submission's steps in a container with no network, a read-only root, and memory, pids, CPU and wall-clock limits (needs a Docker engine and a static lab binary)")
	fs.StringVar(&o.shard, "shard", "", "grade slice `i/n` of the cohort (0 <= i < n): the submissions sorted by name at positions i, i+n, i+2n, …")
	return fs
}

// runGrade grades a cohort of submissions.
func runGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == grade.WorkerArg {
		if code := grade.WorkerMain(args[1:], stderr); code != 0 {
			return fmt.Errorf("step worker: exit %d", code)
		}
		return nil
	}
	var o gradeOptions
	fs := newGradeFlags(&o)
	paths, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, gradeUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("grade: %v. Try: lab grade -h", err)}
	}
	if len(paths) == 0 {
		return usageErr{"grade: no submissions. Try: lab grade --out grades cohort/*"}
	}
	cfg := grade.Config{Out: o.out, Runs: o.runs, Jobs: o.jobs, Parallel: o.parallel, StepTimeout: o.timeout,
		BuildTimeout: o.buildTimeout, GoCache: o.gocache, Log: stdout}
	switch {
	case o.runs < 1:
		return usageErr{"grade: -n must be at least 1. Try: lab grade -n 5 …"}
	case o.jobs < 1:
		return usageErr{"grade: --jobs must be at least 1"}
	case o.timeout <= 0 || o.buildTimeout <= 0:
		return usageErr{"grade: time limits must be positive"}
	}
	if o.points != "" {
		if cfg.Points, err = grade.ParsePoints(o.points); err != nil {
			return usageErr{"grade: " + err.Error()}
		}
	}
	if o.shard != "" {
		if cfg.Shard, err = grade.ParseShard(o.shard); err != nil {
			return usageErr{"grade: " + err.Error()}
		}
	}
	if cfg.GoCache != "" {
		if cfg.GoCache, err = filepath.Abs(cfg.GoCache); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("grade: cannot find the lab executable to run steps: %w", err)
	}
	cfg.Worker = []string{exe, "grade"}
	cfg.Lab = exe
	switch o.isolate {
	case "":
	case "docker":
		eng, err := isolate.New(ctx, exe)
		if err != nil {
			return fmt.Errorf("grade: --isolate docker: %w", err)
		}
		defer eng.Close()
		cfg.RunLab = eng.Runner(isolate.Limits{})
	default:
		return usageErr{fmt.Sprintf("grade: --isolate %q: the only isolation is docker. Try: lab grade --isolate docker …", o.isolate)}
	}

	cohort := grade.Discover(paths)
	mine := cfg.Shard.Take(cohort)
	scope := ""
	if cfg.Shard.N > 1 {
		scope = fmt.Sprintf(" (shard %s of a cohort of %d)", cfg.Shard, len(cohort))
	}
	points := cfg.Points
	if points == nil {
		points = grade.DefaultPoints()
	}
	fmt.Fprintf(stdout, "snacklab grade: %d submission(s)%s, %d step(s), %d run(s) each, %d at once → %s\n",
		len(mine), scope, len(points.Steps()), o.runs, o.jobs, o.out)
	for _, s := range mine {
		if s.Kind == grade.KindInvalid {
			fmt.Fprintf(stderr, "lab grade: %s %v\n", s.Path, s.Err)
		}
	}
	rep, err := grade.Grade(ctx, cfg, paths)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	printCohort(stdout, rep, o.out)
	if n := len(rep.Invalid); n > 0 {
		var names []string
		for _, s := range rep.Invalid {
			names = append(names, s.Path)
		}
		return usageErr{fmt.Sprintf("grade: %d submission(s) not graded, recorded with 0 points: %s", n, strings.Join(names, ", "))}
	}
	return nil
}

// printCohort ends a grading run with the cohort's verdict.
func printCohort(w io.Writer, rep *grade.Report, out string) {
	n, full, notGraded := len(rep.Graded), 0, 0
	total, maxScore := 0.0, 0.0
	for _, r := range rep.Graded {
		total += r.Score
		maxScore = r.Max
		if r.Problem != "" {
			notGraded++
		} else if r.Score == r.Max {
			full++
		}
	}
	mean := 0.0
	if n > 0 {
		mean = total / float64(n)
	}
	rate := 0.0
	if rep.Took > 0 {
		rate = float64(n) / rep.Took.Minutes()
	}
	fmt.Fprintf(w, "graded %d submission(s) in %.1fs (%.1f per minute): mean %.1f of %g, %d full marks, %d not graded\n",
		n, rep.Took.Seconds(), rate, mean, maxScore, full, notGraded)
	fmt.Fprintf(w, "reports: %s\n", filepath.Join(out, "grades.{csv,md,html}"))
}

// runMerge joins the results of shards.
func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab merge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "output `dir`")
	dirs, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, mergeUsage)
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("merge: %v. Try: lab merge --out DIR SHARDDIR...", err)}
	}
	if *out == "" || len(dirs) == 0 {
		return usageErr{"merge: want --out DIR and at least one SHARDDIR. Try: lab merge --out grades shard-0 shard-1"}
	}
	rep, err := grade.Merge(*out, dirs)
	if err != nil {
		return usageErr{"merge: " + err.Error()}
	}
	fmt.Fprintf(stdout, "merged %d shard(s): %d submission(s) → %s\n", rep.Shards, len(rep.Records), filepath.Join(*out, "grades.{csv,md,html}"))
	return nil
}
