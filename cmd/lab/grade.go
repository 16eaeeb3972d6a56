package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"snacklab/containers"
	"snacklab/internal/cliflag"
	"snacklab/internal/grade"
	"snacklab/internal/isolate"
	"snacklab/labsteps/result"
)

const gradeUsage = `usage: lab grade [flags] SUBMISSION...

Grades a cohort. A SUBMISSION is a learner's copy of the module (a directory
with go.mod) or a directory of static executables queuectl, sender and
receiver. By default every submission is built and run in Docker containers:
no network, a read-only root, an unprivileged user, memory, CPU, pids and
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
its own results and row (lab tables --out DIR rebuilds the tables alone).
results.json has one test per part of each step (step 6: a–o), the step's
points split among them; a part that fails or is flaky scores 0.

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
	visibility                           string
	tables                               grade.TableOptions
	runs, jobs, parallel, shards         int
	timeout, buildTimeout, wall          time.Duration
	trusted                              bool
	memory, buildMemory                  int64
	pids                                 int64
	cpus                                 float64
}

func newGradeFlags(o *gradeOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("lab grade", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "grades", "output `dir`")
	fs.StringVar(&o.points, "points", "", "points per step: `1=10,2=10,…` (steps not listed are not run) or a file of such pairs, which may also weight parts (6.c=2) and set visibility (6.n=hidden, *=after_due_date) (default: all 8 steps, 12.5 each; docs/grading.md)")
	fs.StringVar(&o.visibility, "visibility", "", "Gradescope visibility: `visible`, hidden, after_due_date or after_published for everything, or KEY=VALUE pairs for a step or part (*=after_due_date,6.n=hidden)")
	tableFlags(fs, &o.tables)
	cliflag.IntVar(fs, &o.runs, "n", 1, "run each submission this many times; a step that passes in some runs and fails in others is flaky and scores 0")
	cliflag.IntVar(fs, &o.jobs, "jobs", runtime.NumCPU(), "submissions graded at once")
	cliflag.IntVar(fs, &o.parallel, "parallel", 0, "steps of one submission run at once (default: all)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "time limit of one step")
	fs.DurationVar(&o.buildTimeout, "build-timeout", 5*time.Minute, "time limit of one submission's go build")
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
	if len(paths) == 0 {
		return usageErr{"grade: no submissions. Try: lab grade --out grades cohort/*"}
	}
	cfg := grade.Config{Out: o.out, Runs: o.runs, Jobs: o.jobs, Parallel: o.parallel, StepTimeout: o.timeout,
		BuildTimeout: o.buildTimeout, GoCache: o.gocache, Log: stdout, Tables: o.tables}
	switch {
	case o.runs < 1:
		return usageErr{"grade: -n must be at least 1. Try: lab grade -n 5 …"}
	case o.jobs < 1:
		return usageErr{"grade: --jobs must be at least 1"}
	case o.timeout <= 0 || o.buildTimeout <= 0:
		return usageErr{"grade: time limits must be positive"}
	}
	if o.points != "" {
		if cfg.Points, cfg.Scheme, err = grade.ParseScheme(o.points); err != nil {
			return usageErr{"grade: " + err.Error()}
		}
	}
	if o.visibility != "" {
		if err := grade.ParseVisibility(o.visibility, &cfg.Scheme); err != nil {
			return usageErr{"grade: " + err.Error()}
		}
	}
	switch {
	case o.shard == "auto":
		var from string
		if cfg.Shard, from, err = grade.AutoShard(o.shards, os.Getenv); err != nil {
			return usageErr{"grade: --shard auto: " + strings.TrimPrefix(err.Error(), "--shard auto: ") + ". Try: lab grade --shard auto --shards 4 …"}
		}
		fmt.Fprintf(stdout, "lab grade: %s\n", from)
	case o.shards != 0:
		return usageErr{"grade: --shards goes with --shard auto (--shard i/n already gives n)"}
	case o.shard != "":
		if cfg.Shard, err = grade.ParseShard(o.shard); err != nil {
			return usageErr{"grade: " + err.Error()}
		}
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
	switch {
	case o.trusted && o.isolate == "pod":
		return usageErr{"grade: --trusted and --isolate pod: choose one (--isolate pod separates the judge from the judged inside a pod; --trusted does not)"}
	case o.trusted:
	case o.isolate == "pod":
		b, closeEngine, err := podBoundary(ctx, exe, o, stdout)
		if err != nil {
			return err
		}
		defer closeEngine()
		cfg.Boundary = b
	case o.isolate != "docker":
		return usageErr{fmt.Sprintf("grade: --isolate %q: want docker (the default) or pod; for code you trust, --trusted", o.isolate)}
	case o.memory < 32 || o.pids < 16 || o.cpus < 0.01 || o.wall < 0 || o.buildMemory < 256:
		return usageErr{"grade: --memory is at least 32 (MiB), --pids 16, --cpus 0.01, --build-memory 256 (MiB), --wall >= 0"}
	default:
		steps := 8
		if cfg.Points != nil {
			steps = len(cfg.Points.Steps())
		}
		b, closeEngine, err := isolatedBoundary(ctx, exe, o, steps, stdout)
		if err != nil {
			return err
		}
		defer closeEngine()
		cfg.Boundary = b
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
	rep, err := grade.Grade(ctx, cfg, paths)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	printCohort(stdout, rep, o.out)
	if n := len(rep.Invalid); n > 0 {
		var names []string
		for _, s := range rep.Invalid {
			names = append(names, grade.Clean(s.Path))
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
	if dirs, err = grade.ExpandCohort(dirs); err != nil { // a pod's args: no shell expands shard-*
		return usageErr{"merge: " + err.Error()}
	}
	rep, err := grade.Merge(*out, dirs)
	if err != nil {
		return usageErr{"merge: " + err.Error()}
	}
	fmt.Fprintf(stdout, "merged %d shard(s): %d submission(s) → %s\n", rep.Shards, len(rep.Records), filepath.Join(*out, "grades.{csv,md,html}"))
	return nil
}

// isolatedBoundary connects to the Docker engine and makes the boundary a
// cohort is built and graded in. The lab binary put in the grading image
// must be static: when this one is not (built with cgo, as `go build` does
// where gcc is present), a static copy is built from the module in the
// current directory, or the error says the exact command.
func isolatedBoundary(ctx context.Context, exe string, o gradeOptions, steps int, stdout io.Writer) (*grade.Boundary, func(), error) {
	lab, cleanup, err := staticLab(ctx, exe, stdout)
	if err != nil {
		return nil, nil, err
	}
	eng, err := isolate.New(ctx, lab)
	cleanup()
	if errors.Is(err, isolate.ErrNoEngine) {
		return nil, nil, fmt.Errorf("grade: isolating the submissions needs a Docker engine (%w); start one, or, only for code you trust, grade with --trusted", err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("grade: %w", err)
	}
	lim := isolate.Limits{Memory: o.memory << 20, PIDs: o.pids, CPUs: o.cpus, Wall: o.wall}
	gocache := o.gocache
	if gocache == "" {
		if gocache, err = isolate.DefaultGoCache(); err != nil {
			eng.Close()
			return nil, nil, err
		}
	}
	wall := o.wall
	if wall == 0 {
		par := o.parallel
		if par <= 0 || par > steps {
			par = steps
		}
		wall = time.Duration((steps+par-1)/par)*o.timeout + isolate.WallGrace
	}
	crashLim := isolate.Limits{Memory: lim.Memory, PIDs: lim.PIDs, CPUs: lim.CPUs}
	b := &grade.Boundary{
		Mode: fmt.Sprintf("isolated in Docker: built and run in containers with no network, a read-only root, the lab as root with six capabilities and the submission's programs as uid 65533 apart from it; %d MiB, %g CPU, %d pids, %v wall clock per submission",
			o.memory, o.cpus, o.pids, wall),
		Build: eng.BuildFunc(gocache, isolate.Limits{Memory: o.buildMemory << 20}),
		Run:   grade.StepRunner(eng.Runner(lim)),
		// lab crash in the same containers, with its own wall-clock limit.
		Crash:    eng.CrashRunner(crashLim),
		PowerCut: eng.PowerCutRunner(crashLim),
	}
	// The reference's dependencies warm the shared build cache first, in a
	// build container of their own, so no submission's build waits on a
	// classmate's (a hanging one would hold them all for its limit). Away
	// from the snacklab module the builds start cold, side by side.
	if root, err := moduleRoot(""); err == nil {
		b.Warm = eng.WarmFunc(root, gocache, isolate.Limits{Memory: o.buildMemory << 20}, o.buildTimeout)
	}
	return b, func() { eng.Close() }, nil
}

// podBoundary makes the boundary of --isolate pod: the pod is the
// boundary someone else made, and inside it the judge and the judged are
// separated as in a grading container (isolate.NewLocal). Builds run here
// as the judge (no submission code runs during a build); every
// submission's steps and crash runs are a lab process of their own whose
// programs run as other uids.
func podBoundary(ctx context.Context, exe string, o gradeOptions, stdout io.Writer) (*grade.Boundary, func(), error) {
	lab, cleanup, err := staticLab(ctx, exe, stdout)
	if err != nil {
		return nil, nil, err
	}
	eng, err := isolate.NewLocal(ctx, lab)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("grade: --isolate pod: %w", err)
	}
	lim := isolate.Limits{Wall: o.wall}
	b := &grade.Boundary{
		Mode: "isolated in a pod: built in the pod, each submission's lab run as root with six capabilities and its programs as other uids (200000 and up) apart from it; the pod's network, file system and limits",
		Run:  grade.StepRunner(eng.Runner(lim)),
		// lab crash likewise.
		Crash:    eng.CrashRunner(isolate.Limits{}),
		PowerCut: eng.PowerCutRunner(isolate.Limits{}),
	}
	return b, func() { eng.Close(); cleanup() }, nil
}

// staticLab returns a static lab binary: exe itself, or one built into a
// temporary directory from the snacklab module holding the current
// directory (moduleRoot), so lab grade run in a subdirectory builds it too.
func staticLab(ctx context.Context, exe string, stdout io.Writer) (string, func(), error) {
	nothing := func() {}
	carries, err := isolate.CarriesMutants(exe)
	if err != nil {
		return "", nil, err
	}
	if containers.CheckStatic(exe) == nil && !carries {
		return exe, nothing, nil
	}
	// The containers' lab is static and carries no mutants (their search
	// texts are the reference's lines, and the judged must not read them).
	const cmd = "CGO_ENABLED=0 go build -tags nomutants -o bin/ ./cmd/lab"
	root, err := moduleRoot("")
	if err != nil {
		return "", nil, fmt.Errorf("grade: %s is dynamically linked or carries the mutants, and the grading containers take a static lab without them: build one with `%s` in the snacklab module (or grade trusted code with --trusted)", exe, cmd)
	}
	dir, err := os.MkdirTemp("", "snacklab-lab-*")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stdout, "lab grade: building the containers' lab: static, without the mutants (%s)\n", cmd)
	b := exec.CommandContext(ctx, "go", "build", "-tags", "nomutants", "-o", filepath.Join(dir, "lab"), "./cmd/lab")
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	b.Dir = root
	if out, err := b.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("grade: building a static lab: %v\n%s\nbuild it yourself with `%s`", err, out, cmd)
	}
	return filepath.Join(dir, "lab"), func() { os.RemoveAll(dir) }, nil
}
