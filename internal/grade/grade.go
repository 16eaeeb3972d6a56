// Package grade grades a cohort of snacklab submissions: each is built (a Go
// module) or taken as is (a directory of executables honouring CONTRACT.md),
// run through the lab's steps, and scored with points per step. Per
// submission it writes Gradescope's results.json, JUnit XML, an HTML report
// and the work dirs of failing steps; per cohort grades.csv, grades.md and
// grades.html. Submissions run in parallel and apart: with a Boundary
// (lab grade's default, internal/isolate) each is built and run in
// containers; without one (--trusted) every step runs in a worker process
// leading its own process group and cgroup, so a hung, crashed or runaway
// solution costs only its own step, and every process it started is
// killed. Every report says which mode graded it, and no text a submission
// produced reaches a report before Clean. See docs/grading.md.
package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"snacklab/labsteps"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// Config says how to grade.
type Config struct {
	Out          string        // output directory
	Points       Points        // graded steps and their points; nil: DefaultPoints
	Scheme       report.Scheme // how a step's points split among its parts, and who sees what
	Runs         int           // runs of each submission (-n); 0 is 1
	Jobs         int           // submissions graded at once; 0 is runtime.NumCPU()
	Parallel     int           // steps of one submission run at once; 0 is all of them
	Retries      int           // how many times a step not judged runs again, alone, before it is reported (0: none)
	StepTimeout  time.Duration // per step; 0: derived by each step from its calibration and the load
	BuildTimeout time.Duration // per go build; 0: derived from the load when the build starts (buildLimit)
	GoCache      string        // GOCACHE for builds; "" is go's default
	MemLimit     int64         // a step's worker is stopped past this resident size; 0 is 512 MiB
	Shard        Shard         // the slice of the cohort to grade; zero is all of it
	// Worker is the command that runs one step in its own process: the
	// program and the arguments before WorkerArg (for the lab binary:
	// [lab, "grade"]). Required.
	Worker []string
	// Lab is how reports spell the lab command in replay lines; "" is "lab".
	Lab string
	// Log receives a line per graded submission and the flaky replays; nil discards.
	Log io.Writer
	// Boundary, when set, is where every submission is built and run
	// (internal/isolate: a container per build and per submission, no
	// network). nil is the unisolated mode (lab grade --trusted): builds
	// and steps run on this machine as the grader's user.
	Boundary *Boundary
	// Tables say how the cohort tables name the submissions: a roster,
	// anonymised copies.
	Tables TableOptions
	// StepMemory bounds the memory of all the processes of one step in the
	// unisolated mode, where a cgroup can be made; 0 is 1 GiB.
	StepMemory int64
}

// Boundary runs untrusted work somewhere the submission cannot reach the
// grader, the host or another submission.
type Boundary struct {
	// Mode says in every report how the submission was graded
	// ("isolated: Docker, no network, 512 MiB, …").
	Mode string
	// Build builds the module in src (already checked by CheckSource) into
	// bin/{queuectl,sender,receiver} within timeout. failure is the
	// submission's problem ("" when it built), output the compiler's; err
	// is the grader's own failure. nil: the build runs on this machine as
	// the grader, as unisolated (a pod's boundary: no submission code runs
	// during a build).
	Build func(ctx context.Context, src, bin string, timeout time.Duration) (output, failure string, err error)
	// Warm, when set, fills the shared build cache with a trusted build
	// (the reference's dependencies) before any submission is built, so
	// every submission's build starts at once and none waits on another's
	// (issue #19: a hanging first build held every classmate's for its
	// limit). nil: the submissions' builds start at once on a cold cache.
	Warm func(ctx context.Context) error
	// Run runs steps against the executables in bin and returns one
	// result per step, in the order given; err is the grader's own failure.
	Run func(ctx context.Context, bin string, steps []labsteps.Step, stepTimeout time.Duration, parallel int) ([]result.Result, error)
	// Crash, when set, runs lab crash against the executables in bin
	// across the boundary (the lab as the judge, the programs as the
	// judged), for the crash item (--points crashpoints=N); PowerCut
	// likewise lab crash --power-cut (powercut=N). nil: the item is not
	// run in this boundary ("Not run.").
	Crash    CrashRunner
	PowerCut PowerCutRunner
}

// TrustedMode is the mode every report of an unisolated run states.
const TrustedMode = "unisolated (--trusted): built and run on the grading machine as the grader's user"

// Report is what Grade did.
type Report struct {
	Cohort  []Submission // every submission given, named and sorted
	Graded  []Record     // this shard's, sorted by name
	Invalid []Submission // this shard's submissions that were not there or not submissions
	Took    time.Duration
}

type grader struct {
	cfg   Config
	mode  string
	cg    *cgroups // nil: no cgroups here (unisolated mode falls back to groups and tags)
	tmp   string
	logMu sync.Mutex
	warm  chan struct{} // closed when the cache is warm: the trusted build, or (unisolated) the first module build, has finished
	first atomic.Bool   // the warming build has started
}

// Grade grades the shard cfg.Shard of the cohort paths, writes every report
// into cfg.Out and returns what it graded. Submissions that are not there or
// not submissions are recorded with 0 points and listed in Report.Invalid;
// a build failure scores 0 with the compiler's output. Only a problem of the
// grader itself (an unwritable output directory, no worker) is an error.
func Grade(ctx context.Context, cfg Config, paths []string) (*Report, error) {
	t0 := time.Now()
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cohort := Discover(paths)
	prev, had, err := openOut(cfg, cohort)
	if err != nil {
		return nil, err
	}
	g, err := newGrader(cfg)
	if err != nil {
		return nil, err
	}
	defer g.close()

	mine := cfg.Shard.Take(cohort)
	rep := &Report{Cohort: cohort}
	records, gerr := g.gradeAll(ctx, mine, rep)
	// Reports are rebuilt from the results.json files just written: the same
	// path `lab merge` takes, so a merge of shards equals a single run.
	var graded []string
	for _, r := range records {
		if r.Name != "" {
			graded = append(graded, r.Name)
		}
	}
	m := Manifest{Shard: cfg.Shard.I, Of: cfg.Shard.N, Cohort: names(cohort), Graded: graded, Points: cfg.Points, Runs: cfg.Runs}
	recs, err := writeOut(cfg, m, prev, had, graded)
	rep.Graded = recs
	rep.Took = time.Since(t0)
	if gerr != nil {
		if ctx.Err() != nil {
			return rep, fmt.Errorf("grading interrupted after %d of %d submissions: %w", len(graded), len(mine), ctx.Err())
		}
		return rep, gerr
	}
	return rep, err
}

// withDefaults fills in the zero fields of cfg, makes Out absolute, and
// refuses a configuration no grading can start from.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Points == nil {
		cfg.Points = DefaultPoints()
	}
	if cfg.Runs < 1 {
		cfg.Runs = 1
	}
	if cfg.Jobs < 1 {
		cfg.Jobs = runtime.NumCPU()
	}
	// StepTimeout 0: each step derives its limit (labsteps.RunStep);
	// BuildTimeout 0: each build's limit is derived when it starts
	// (buildLimit).
	if cfg.MemLimit == 0 {
		cfg.MemLimit = 512 << 20
	}
	if cfg.StepMemory == 0 {
		cfg.StepMemory = 1 << 30
	}
	if cfg.Shard.N == 0 {
		cfg.Shard = Shard{0, 1}
	}
	if cfg.Shard.I < 0 || cfg.Shard.I >= cfg.Shard.N {
		return cfg, fmt.Errorf("grade: shard %s: want i/n with 0 <= i < n", cfg.Shard)
	}
	if cfg.Lab == "" {
		cfg.Lab = "lab"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if len(cfg.Worker) == 0 {
		return cfg, errors.New("grade: no worker command")
	}
	if cfg.Out == "" {
		return cfg, errors.New("grade: no output directory")
	}
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return cfg, err
	}
	cfg.Out = out
	return cfg, nil
}

// openOut checks that the cohort may be graded into cfg.Out and makes it.
// An existing --out must hold this shard (or no shard) and rows graded
// with the same points, so that its tables stay comparable; its manifest
// is prev (had: there was one).
func openOut(cfg Config, cohort []Submission) (prev Manifest, had bool, err error) {
	if err := checkOut(cfg.Out, cohort); err != nil {
		return prev, false, err
	}
	prev, perr := readManifest(cfg.Out)
	had = perr == nil
	if had && prev.Of > 1 && cfg.Shard.N > 1 && prev.Shard != cfg.Shard.I {
		return prev, had, fmt.Errorf("--out %s holds shard %d/%d; give each shard its own --out", cfg.Out, prev.Shard, prev.Of)
	}
	if had && len(prev.Graded) > 0 && !maps.Equal(prev.Points, cfg.Points) {
		return prev, had, fmt.Errorf("--out %s holds %d submissions graded with --points %s, not %s: regrade with the same points so the rows stay comparable, or grade into another --out",
			cfg.Out, len(prev.Graded), prev.Points, cfg.Points)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return prev, had, err
	}
	return prev, had, nil
}

// newGrader makes the grader of cfg: its mode, the cgroups of the
// unisolated mode, and a temp dir. The caller closes it.
func newGrader(cfg Config) (*grader, error) {
	g := &grader{cfg: cfg, warm: make(chan struct{}), mode: TrustedMode}
	if cfg.Boundary != nil {
		g.mode = cfg.Boundary.Mode
	} else {
		g.cg = newCgroups()
	}
	tmp, err := os.MkdirTemp("", "snacklab-grade-*")
	if err != nil {
		g.close()
		return nil, err
	}
	g.tmp = tmp
	return g, nil
}

// close removes the grader's temp dir, then its cgroups.
func (g *grader) close() {
	if g.tmp != "" {
		os.RemoveAll(g.tmp)
	}
	g.cg.close() // nil-safe: no cgroups in the isolated mode, or none to be had
}

// gradeAll grades the submissions mine, cfg.Jobs at once, and adds the
// invalid ones to rep.Invalid. A record is zero where its submission was
// not graded (the grader failed, or ctx ended first); the error is the
// first such failure.
func (g *grader) gradeAll(ctx context.Context, mine []Submission, rep *Report) ([]Record, error) {
	records := make([]Record, len(mine))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(g.cfg.Jobs)
	for i, sub := range mine {
		if sub.Kind == KindInvalid {
			rep.Invalid = append(rep.Invalid, sub)
		}
		eg.Go(func() error {
			if ectx.Err() != nil {
				return ectx.Err()
			}
			rec, err := g.gradeOne(ectx, sub)
			if err != nil {
				return fmt.Errorf("%s: %w", sub.Name, err)
			}
			records[i] = rec
			g.logRecord(rec)
			return nil
		})
	}
	return records, eg.Wait()
}

// writeOut writes the manifest m and rebuilds the tables. An existing
// --out (prev, when had) keeps its other submissions: this run's join them
// (a regrade replaces only its own), and the tables are rebuilt from every
// results.json there. It returns the records of this run's submissions.
func writeOut(cfg Config, m, prev Manifest, had bool, graded []string) ([]Record, error) {
	if had {
		m.Cohort = union(prev.Cohort, m.Cohort)
		m.Graded = union(prev.Graded, m.Graded)
		if cfg.Shard.N == 1 && prev.Of > 1 {
			m.Shard, m.Of = prev.Shard, prev.Of
		}
	}
	if err := writeManifest(cfg.Out, m); err != nil {
		return nil, err
	}
	all, err := Rebuild(cfg.Out, cfg.Tables)
	var recs []Record
	for _, r := range all {
		if slices.Contains(graded, r.Name) {
			recs = append(recs, r)
		}
	}
	return recs, err
}

// checkOut refuses an output directory in which a submission's results
// directory would be the submission or hold it: grading replaces what it
// writes there (results, logs, bin). Results inside a submission (a learner
// grading their own module into ./grades) are fine.
func checkOut(out string, cohort []Submission) error {
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, b+string(filepath.Separator)) }
	for _, s := range cohort {
		p, err := filepath.Abs(s.Path)
		if err != nil || s.Kind == KindInvalid {
			continue
		}
		if d := filepath.Join(out, s.Name); within(p, d) {
			return fmt.Errorf("--out %s: the results of %s would go to %s, which holds the submission %s; choose another --out", out, s.Name, d, s.Path)
		}
	}
	return nil
}

// union is a and b's strings, each once, sorted.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

func names(subs []Submission) []string {
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.Name
	}
	return out
}

// StepRunner converts a runner with the same shape under another name
// (isolate.LabRunner) to Boundary.Run's type.
func StepRunner[F ~func(context.Context, string, []labsteps.Step, time.Duration, int) ([]result.Result, error)](f F) func(context.Context, string, []labsteps.Step, time.Duration, int) ([]result.Result, error) {
	return f
}
