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

	"snacklab/internal/autograder"
	"snacklab/internal/cliflag"
	"snacklab/internal/grade"
	"snacklab/internal/isolate"
	"snacklab/labsteps/result"
)

const gradeUsage = `usage: lab grade [flags] SUBMISSION...

Grades a cohort. A SUBMISSION is a learner's copy of the module (a directory
with go.mod) or a directory of static executables queuectl, sender and
receiver. By default every submission is built and run in Docker containers:
no network, a root the submission cannot write, an unprivileged user, memory, CPU, pids and
wall-clock limits (see --memory, --cpus, --pids, --wall); it needs a Docker
engine. --isolate pod grades where there is no Docker engine, inside a
boundary someone else made (a Kubernetes pod, docs/kubernetes.md): the lab,
root with six capabilities, runs the submission's programs as other uids.
--trusted builds and runs on this machine as you, for code you trust (your
own, the reference). Every report says which mode graded it.
Flags may come before or after the submissions. A quoted pattern
('cohort/*') is expanded by lab itself, for where no shell runs it (a pod);
--shard auto takes the shard from a Kubernetes Indexed Job or a CI's
parallel-job variables (docs/kubernetes.md).

Writes, in --out DIR:
  DIR/NAME/results.json  Gradescope's format (points per step)
  DIR/NAME/junit.xml     JUnit XML;  DIR/NAME/report.html  the lab's report
  DIR/NAME/logs/         work dirs of failing steps (--trusted);  DIR/NAME/bin/  the build
  DIR/grades.csv, grades.md, grades.html   the cohort: submission × step
  DIR/grades-anon.*      the same under pseudonyms (--anonymise)
  DIR/shard.json         which slice of which cohort (for lab merge)

An existing DIR keeps its other submissions: grading one again replaces only
its own results and row (lab tables --out DIR rebuilds the tables alone);
--not-graded DIR grades again only the rows DIR records as not graded.
results.json has one test per part of each step (6.c: step 6's part c; the
parts are the letters lab run prints), the step's points split among them; a
part that fails or is flaky scores 0.

Exit: 0 every submission graded (whatever its score); 2 a usage error, or some
SUBMISSION missing or not a submission (the others are still graded and it is
recorded with 0 points); 3 some submission not graded: a part of it was not
judged (a limit the grader set ran out, the grader erred), named on stderr,
with no score anywhere; 1 the grader itself failed; 130/143 interrupted.

flags:
`

type gradeOptions struct {
	out, points, shard, gocache, isolate  string
	visibility, notGraded                 string
	tables                                grade.TableOptions
	runs, jobs, parallel, shards, retries int
	timeout, buildTimeout, wall           time.Duration
	trusted                               bool
	memory, buildMemory                   int64
	pids                                  int64
	cpus                                  float64
	fromRepos                             string // --from-repos (lab autograder's Repos)
	fromGradescope                        string // --from-gradescope (autograder.ReadGradescopeExport)
}

func newGradeFlags(o *gradeOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("lab grade", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "grades", "output `dir`")
	fs.StringVar(&o.points, "points", "", "points per step: `1=10,2=10,…` (steps not listed are not run) or a file of such pairs, which may also weight parts (6.c=2) and set visibility (6.n=hidden, *=after_due_date) (default: all 8 steps, 12.5 each, split among their parts by the default weights of docs/grading.md)")
	fs.StringVar(&o.visibility, "visibility", "", "Gradescope visibility: `visible`, hidden, after_due_date or after_published for everything, or KEY=VALUE pairs for a step or part (*=after_due_date,6.n=hidden)")
	tableFlags(fs, &o.tables)
	fs.StringVar(&o.fromRepos, "from-repos", "", "grade every repository cloned in this `dir` (GitHub Classroom's student repos), each named after its repository: the student's id in every report")
	fs.StringVar(&o.fromGradescope, "from-gradescope", "", "grade Gradescope's submissions export, a `zip` or its unpacked directory (Download Submissions), and write its students to OUT/roster.csv (submission, student_id, name, email); give no SUBMISSION, --from-repos, --roster or --not-graded")
	cliflag.IntVar(fs, &o.runs, "n", 1, "run each submission this many times; a step that passes in some runs and fails in others is flaky and scores 0")
	cliflag.IntVar(fs, &o.jobs, "jobs", runtime.NumCPU(), "submissions graded at once")
	cliflag.IntVar(fs, &o.parallel, "parallel", 0, "steps of one submission run at once (default: all)")
	fs.StringVar(&o.notGraded, "not-graded", "", "grade again, into `DIR` (a cohort's --out), only the submissions it records as not graded, from the paths they were graded from; give no SUBMISSION")
	cliflag.IntVar(fs, &o.retries, "retries", 2, "times a step that was not judged (a limit the grader set ran out, the grader erred) runs again, alone, after a pause, before the submission is reported not graded")
	fs.DurationVar(&o.timeout, "timeout", 0, "time limit of one step (default: derived, as lab run derives it, from the calibration of the submission's programs and the machine's load: at least 60s, more on a loaded grader)")
	fs.DurationVar(&o.buildTimeout, "build-timeout", 0, "time limit of one submission's go build (default: 5m scaled by the machine's load per core when the build starts, up to 50m; a build the grader kills at its own limit is not graded, never a 0)")
	fs.StringVar(&o.gocache, "gocache", "", "GOCACHE for the builds (default: go's own with --trusted; isolated builds use a directory of their own under the user's cache dir, handed to the containers' user: never give them the host's own cache)")
	fs.BoolVar(&o.trusted, "trusted", false, "the code is trusted: build and run it on this machine as your user, without containers (processes still get a minimal environment, a cgroup and a memory limit where possible)")
	fs.StringVar(&o.isolate, "isolate", "docker", "where untrusted code runs: `docker` (the default: a container per build and per submission), or pod: inside the boundary this lab already runs in (a Kubernetes pod, docs/kubernetes.md), as root with the six capabilities of a grading container, each submission's programs as other uids; --trusted turns isolation off")
	fs.Int64Var(&o.memory, "memory", isolate.DefaultMemory>>20, "isolated: memory limit of one submission's container, in MiB (its processes and its tmpfs work dirs)")
	fs.Float64Var(&o.cpus, "cpus", isolate.DefaultCPUs, "isolated: CPUs one submission's container may use")
	fs.Int64Var(&o.pids, "pids", isolate.DefaultPIDs, "isolated: processes and threads alive at once in one container")
	fs.DurationVar(&o.wall, "wall", 0, "isolated: wall-clock limit of one submission's container (default: --timeout × rounds of steps + 30s)")
	fs.Int64Var(&o.buildMemory, "build-memory", isolate.DefaultBuildMemory>>20, "isolated: memory limit of one build's container, in MiB")
	fs.StringVar(&o.shard, "shard", "", "grade slice `i/n` of the cohort (0 <= i < n): the submissions sorted by name at positions i, i+n, i+2n, …; auto: i (and n) from the environment: JOB_COMPLETION_INDEX (Kubernetes Indexed Job), CI_NODE_INDEX/CI_NODE_TOTAL (GitLab, 1-based), BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT, CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL")
	fs.IntVar(&o.shards, "shards", 0, "with --shard auto: the number of shards `n`, where the environment gives only the index (a Kubernetes Job's completions; or set "+grade.ShardsEnv+")")
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
	if o.fromRepos != "" {
		repos, err := autograder.Repos(o.fromRepos)
		if err != nil {
			return usageErr{fmt.Sprintf("grade: --from-repos %s: %v", o.fromRepos, err)}
		}
		paths = append(paths, repos...)
	}
	var export autograder.Export
	if o.fromGradescope != "" {
		if len(paths) > 0 || o.tables.Roster != "" || o.notGraded != "" {
			return usageErr{"grade: --from-gradescope grades the export alone and writes its roster: give no SUBMISSION, --from-repos, --roster or --not-graded"}
		}
		if export, err = autograder.ReadGradescopeExport(o.fromGradescope); err != nil {
			return usageErr{fmt.Sprintf("grade: --from-gradescope %s: %v", o.fromGradescope, err)}
		}
		defer export.Cleanup()
		paths = export.Paths
	}
	if o.notGraded != "" {
		if paths, err = notGradedPaths(fs, &o, paths, stdout); err != nil || len(paths) == 0 {
			return err
		}
	}
	if len(paths) == 0 {
		return usageErr{"grade: no submissions. Try: lab grade --out grades cohort/*"}
	}
	cfg, err := gradeConfig(o, stdout)
	if err != nil {
		return err
	}
	if paths, err = grade.ExpandCohort(paths); err != nil {
		return usageErr{"grade: " + err.Error()}
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
	closeBoundary, err := setBoundary(ctx, &cfg, exe, o, stdout)
	if err != nil {
		return err
	}
	defer closeBoundary()
	if export.Roster != nil {
		if err := grade.WriteRoster(filepath.Join(o.out, grade.RosterName), export.Roster); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}

	announceGrade(stdout, stderr, cfg, o, paths)
	rep, err := grade.Grade(ctx, cfg, paths)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	printCohort(stdout, rep, o.out)
	var unjudged []string
	for _, r := range rep.Graded {
		if r.NotGraded != "" {
			unjudged = append(unjudged, r.Name)
		}
	}
	if len(unjudged) > 0 {
		return notGradedErr{fmt.Sprintf("grade: %d submission(s) not graded: some part was not judged (the grader's trouble, not theirs: see their note in grades.csv); regrade them: lab grade --out %s SUBMISSION…: %s",
			len(unjudged), o.out, strings.Join(unjudged, ", "))}
	}
	if n := len(rep.Invalid); n > 0 {
		var names []string
		for _, s := range rep.Invalid {
			names = append(names, grade.Clean(s.Path))
		}
		return usageErr{fmt.Sprintf("grade: %d submission(s) not graded, recorded with 0 points: %s", n, strings.Join(names, ", "))}
	}
	return nil
}

// notGradedPaths is what --not-graded DIR grades: the submissions DIR
// records as not graded, into DIR itself (--out, when given, must name it),
// with no SUBMISSION given besides. None: it says so, and nothing is graded.
func notGradedPaths(fs *flag.FlagSet, o *gradeOptions, paths []string, stdout io.Writer) ([]string, error) {
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	switch {
	case len(paths) > 0:
		return nil, usageErr{"grade: --not-graded takes the submissions from DIR's records: give no SUBMISSION. Try: lab grade --not-graded grades"}
	case outSet && filepath.Clean(o.out) != filepath.Clean(o.notGraded):
		return nil, usageErr{fmt.Sprintf("grade: --not-graded %s writes into %s itself, not --out %s", o.notGraded, o.notGraded, o.out)}
	}
	o.out = o.notGraded
	srcs, err := grade.NotGradedSources(o.notGraded)
	if err != nil {
		return nil, usageErr{"grade: --not-graded: " + err.Error()}
	}
	if len(srcs) == 0 {
		fmt.Fprintf(stdout, "lab grade: %s records no submission as not graded: nothing to grade again\n", o.notGraded)
		return nil, nil
	}
	fmt.Fprintf(stdout, "lab grade: grading again the %d submission(s) %s records as not graded\n", len(srcs), o.notGraded)
	return srcs, nil
}

// gradeConfig checks the flags of lab grade and makes the grading's
// configuration of them: limits, points and visibility, and the shard
// (--shard auto says on stdout where it found it).
func gradeConfig(o gradeOptions, stdout io.Writer) (grade.Config, error) {
	cfg := grade.Config{Out: o.out, Runs: o.runs, Jobs: o.jobs, Parallel: o.parallel, Retries: o.retries, StepTimeout: o.timeout,
		BuildTimeout: o.buildTimeout, GoCache: o.gocache, Log: stdout, Tables: o.tables}
	switch {
	case o.runs < 1:
		return cfg, usageErr{"grade: -n must be at least 1. Try: lab grade -n 5 …"}
	case o.jobs < 1:
		return cfg, usageErr{"grade: --jobs must be at least 1"}
	case o.retries < 0:
		return cfg, usageErr{"grade: --retries must be 0 or more"}
	case o.timeout < 0 || o.buildTimeout < 0:
		return cfg, usageErr{"grade: time limits must be positive (or 0: derived from the machine)"}
	}
	var err error
	if o.points != "" {
		if cfg.Points, cfg.Scheme, err = grade.ParseScheme(o.points); err != nil {
			return cfg, usageErr{"grade: " + err.Error()}
		}
	}
	if o.visibility != "" {
		if err := grade.ParseVisibility(o.visibility, &cfg.Scheme); err != nil {
			return cfg, usageErr{"grade: " + err.Error()}
		}
	}
	switch {
	case o.shard == "auto":
		var from string
		if cfg.Shard, from, err = grade.AutoShard(o.shards, os.Getenv); err != nil {
			return cfg, usageErr{"grade: --shard auto: " + strings.TrimPrefix(err.Error(), "--shard auto: ") + ". Try: lab grade --shard auto --shards 4 …"}
		}
		fmt.Fprintf(stdout, "lab grade: %s\n", from)
	case o.shards != 0:
		return cfg, usageErr{"grade: --shards goes with --shard auto (--shard i/n already gives n)"}
	case o.shard != "":
		if cfg.Shard, err = grade.ParseShard(o.shard); err != nil {
			return cfg, usageErr{"grade: " + err.Error()}
		}
	}
	return cfg, nil
}

// setBoundary sets cfg.Boundary as --trusted and --isolate say: none,
// the pod's, or Docker's (the default), exe being this lab. The caller
// calls closeBoundary when grading is over.
func setBoundary(ctx context.Context, cfg *grade.Config, exe string, o gradeOptions, stdout io.Writer) (closeBoundary func(), err error) {
	switch {
	case o.trusted && o.isolate == "pod":
		return nil, usageErr{"grade: --trusted and --isolate pod: choose one (--isolate pod separates the judge from the judged inside a pod; --trusted does not)"}
	case o.trusted:
		return func() {}, nil
	case o.isolate == "pod":
		b, closeEngine, err := podBoundary(ctx, exe, o, stdout)
		if err != nil {
			return nil, err
		}
		cfg.Boundary = b
		return closeEngine, nil
	case o.isolate != "docker":
		return nil, usageErr{fmt.Sprintf("grade: --isolate %q: want docker (the default) or pod; for code you trust, --trusted", o.isolate)}
	case o.memory < 32 || o.pids < 16 || o.cpus < 0.01 || o.wall < 0 || o.buildMemory < 256:
		return nil, usageErr{"grade: --memory is at least 32 (MiB), --pids 16, --cpus 0.01, --build-memory 256 (MiB), --wall >= 0"}
	}
	steps := 8
	if cfg.Points != nil {
		steps = len(cfg.Points.Steps())
	}
	b, closeEngine, err := isolatedBoundary(ctx, exe, o, steps, stdout)
	if err != nil {
		return nil, err
	}
	cfg.Boundary = b
	return closeEngine, nil
}

// announceGrade says what is about to be graded, how and against what, and
// names on stderr each of this shard's paths that is not a submission.
func announceGrade(stdout, stderr io.Writer, cfg grade.Config, o gradeOptions, paths []string) {
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
	mode := grade.TrustedMode
	if cfg.Boundary != nil {
		mode = cfg.Boundary.Mode
	}
	fmt.Fprintf(stdout, "snacklab grade: %d submission(s)%s, %d step(s), %d run(s) each, %d at once → %s\ngraded %s against %s\n",
		len(mine), scope, len(points.Steps()), o.runs, o.jobs, o.out, mode, result.ContractText)
	for _, s := range mine {
		if s.Kind == grade.KindInvalid {
			fmt.Fprintf(stderr, "lab grade: %s %v\n", grade.Clean(s.Path), s.Err)
		}
	}
}

// printCohort ends a grading run with the cohort's verdict.
func printCohort(w io.Writer, rep *grade.Report, out string) {
	n, full, notGraded, scored := len(rep.Graded), 0, 0, 0
	total, maxScore := 0.0, 0.0
	for _, r := range rep.Graded {
		maxScore = r.Max
		switch {
		case r.NotGraded != "":
			notGraded++
			continue // no grade: not in the mean
		case r.Problem != "":
			notGraded++
		case r.Score == r.Max:
			full++
		}
		total += r.Score
		scored++
	}
	mean := 0.0
	if scored > 0 {
		mean = total / float64(scored)
	}
	rate := 0.0
	if rep.Took > 0 {
		rate = float64(n) / rep.Took.Minutes()
	}
	fmt.Fprintf(w, "graded %d submission(s) in %.1fs (%.1f per minute): mean %.1f of %g, %d full marks, %d not graded\n",
		n, rep.Took.Seconds(), rate, mean, maxScore, full, notGraded)
	fmt.Fprintf(w, "reports: %s\n", filepath.Join(out, "grades.{csv,md,html}"))
}
