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
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
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
	StepTimeout  time.Duration // per step; 0 is 60s
	BuildTimeout time.Duration // per go build; 0 is 5m
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
	if cfg.Points == nil {
		cfg.Points = DefaultPoints()
	}
	if cfg.Runs < 1 {
		cfg.Runs = 1
	}
	if cfg.Jobs < 1 {
		cfg.Jobs = runtime.NumCPU()
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = time.Minute
	}
	if cfg.BuildTimeout <= 0 {
		cfg.BuildTimeout = 5 * time.Minute
	}
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
		return nil, fmt.Errorf("grade: shard %s: want i/n with 0 <= i < n", cfg.Shard)
	}
	if cfg.Lab == "" {
		cfg.Lab = "lab"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if len(cfg.Worker) == 0 {
		return nil, errors.New("grade: no worker command")
	}
	if cfg.Out == "" {
		return nil, errors.New("grade: no output directory")
	}
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return nil, err
	}
	cfg.Out = out
	cohort := Discover(paths)
	if err := checkOut(cfg.Out, cohort); err != nil {
		return nil, err
	}
	prev, perr := readManifest(cfg.Out)
	if perr == nil && prev.Of > 1 && cfg.Shard.N > 1 && prev.Shard != cfg.Shard.I {
		return nil, fmt.Errorf("--out %s holds shard %d/%d; give each shard its own --out", cfg.Out, prev.Shard, prev.Of)
	}
	if perr == nil && len(prev.Graded) > 0 && !maps.Equal(prev.Points, cfg.Points) {
		return nil, fmt.Errorf("--out %s holds %d submissions graded with --points %s, not %s: regrade with the same points so the rows stay comparable, or grade into another --out",
			cfg.Out, len(prev.Graded), prev.Points, cfg.Points)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	g := &grader{cfg: cfg, warm: make(chan struct{}), mode: TrustedMode}
	if cfg.Boundary != nil {
		g.mode = cfg.Boundary.Mode
	} else {
		g.cg = newCgroups()
		defer g.cg.close()
	}
	if g.tmp, err = os.MkdirTemp("", "snacklab-grade-*"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(g.tmp)

	mine := cfg.Shard.Take(cohort)
	rep := &Report{Cohort: cohort}
	records := make([]Record, len(mine))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(cfg.Jobs)
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
	gerr := eg.Wait()
	// Reports are rebuilt from the results.json files just written: the same
	// path `lab merge` takes, so a merge of shards equals a single run.
	var graded []string
	for _, r := range records {
		if r.Name != "" {
			graded = append(graded, r.Name)
		}
	}
	m := Manifest{Shard: cfg.Shard.I, Of: cfg.Shard.N, Cohort: names(cohort), Graded: graded, Points: cfg.Points, Runs: cfg.Runs}
	recs, err := writeOut(cfg, m, prev, perr == nil, graded)
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

func (g *grader) logf(format string, args ...any) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	fmt.Fprintf(g.cfg.Log, format, args...)
}

func (g *grader) logRecord(r Record) {
	pct := 0.0
	if r.Max > 0 {
		pct = 100 * r.Score / r.Max
	}
	r = cleanRecord(r)
	line := fmt.Sprintf("%7s/%-4s %5.1f%%  %-24s", num(r.Score), num(r.Max), pct, r.Name)
	if r.Problem != "" {
		line += "  " + oneLine(firstLine(r.Problem), 200)
	} else {
		line += fmt.Sprintf("  %d/%d steps", r.Passed(), len(r.Steps))
		var failed []string
		for _, s := range r.Steps {
			if st := s.Status(); st != "passed" {
				f := fmt.Sprintf("%d %s", s.Num, st)
				if n := passedParts(s); len(s.Parts) > 0 && s.Runs > 0 {
					f += fmt.Sprintf(" %d/%d parts", n, len(s.Parts))
				}
				failed = append(failed, f)
			}
		}
		if len(failed) > 0 {
			line += " (" + strings.Join(failed, ", ") + ")"
		}
	}
	line += fmt.Sprintf("  %.1fs\n", r.Took)
	for _, f := range r.Flaky() {
		line += fmt.Sprintf("        flaky: step %d %s passed %d of %d runs; replay: %s", f.Num, f.Slug, f.Passes, f.Runs, f.Replay)
		if len(f.Kept) > 0 {
			line += "  (failing run kept in " + f.Kept[0] + ")"
		}
		line += "\n"
	}
	g.logf("%s", line)
}

// passedParts counts the parts of a step that passed every run.
func passedParts(s StepRecord) int {
	n := 0
	for _, p := range s.Parts {
		if p.Status() == "passed" {
			n++
		}
	}
	return n
}

// firstError is the first line of a build's output that is not a package
// header ("# snacklab/cmd/queuectl"), else err.
func firstError(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return err.Error()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ---- one submission ----

// subDir is where a submission's results go; the files grading writes there
// are removed first, so nothing stale survives a regrade.
func (g *grader) subDir(name string) (string, error) {
	d := filepath.Join(g.cfg.Out, name)
	for _, f := range []string{"results.json", "junit.xml", "report.html", "build.log", "logs", "bin"} {
		if err := os.RemoveAll(filepath.Join(d, f)); err != nil {
			return "", err
		}
	}
	return d, os.MkdirAll(d, 0o755)
}

func (g *grader) gradeOne(ctx context.Context, sub Submission) (Record, error) {
	t0 := time.Now()
	dir, err := g.subDir(sub.Name)
	if err != nil {
		return Record{}, err
	}
	abs, _ := filepath.Abs(sub.Path)
	rec := Record{Name: sub.Name, Source: abs, Kind: sub.Kind, Runs: g.cfg.Runs, Mode: g.mode}
	for _, s := range g.cfg.Points.Steps() {
		rec.Steps = append(rec.Steps, StepRecord{Num: s.Num, Slug: s.Slug, Title: s.Title, Points: g.cfg.Points[s.Num],
			Output: "Not run."})
		rec.Max += g.cfg.Points[s.Num]
	}
	var results [][]result.Result // [step][run]
	var notes [][]string
	switch sub.Kind {
	case KindInvalid:
		// The path is the grader's: the teacher's reports show it (Source),
		// the learner's results.json does not.
		rec.Problem = fmt.Sprintf("the submission %v", sub.Err)
	case KindModule, KindBin:
		bin := abs
		if sub.Kind == KindModule {
			bin = filepath.Join(dir, "bin")
			out, failure, err := g.buildModule(ctx, abs, bin)
			if err != nil {
				return Record{}, err
			}
			if failure != "" {
				rec.Problem = failure
				rec.BuildOut = out
				report.WriteFile(filepath.Join(dir, "build.log"), func(w io.Writer) error {
					_, err := io.WriteString(w, Clean(out)+"\n")
					return err
				})
				os.RemoveAll(bin)
				break
			}
		}
		rec.Bin = bin
		if g.cfg.Boundary == nil {
			// Isolated runs check the programs as they stage them.
			if err := labsteps.CheckBin(bin); err != nil {
				rec.Problem = g.student(err.Error(), bin)
				break
			}
		}
		results, notes = g.runAll(ctx, sub.Name, bin, filepath.Join(dir, "logs"))
		if ctx.Err() != nil {
			return Record{}, ctx.Err()
		}
	}
	// Crash verification and the power cut, when they have points: on
	// this machine unisolated; across the boundary when it can run them
	// (Boundary.Crash, Boundary.PowerCut).
	for _, item := range []struct {
		pts   float64
		num   int
		slug  string
		title string
		run   func(ctx context.Context, bin, work string, points float64, name string) StepRecord
	}{
		{g.cfg.Points.CrashPoints(), CrashItem(), CrashName, "crash verification", GradeCrash},
		{g.cfg.Points.PowerCutPoints(), PowerCutItem(), PowerCutName, "power cut", GradePowerCut},
	} {
		if item.pts <= 0 {
			continue
		}
		r := StepRecord{Num: item.num, Slug: item.slug, Title: item.title, Points: item.pts, Output: "Not run."}
		if rec.Problem == "" && rec.Bin != "" {
			var err error
			if r, err = g.runItem(ctx, item.num, item.run, rec.Bin, filepath.Join(dir, item.slug), item.pts, sub.Name, r); err != nil {
				return Record{}, err
			}
		}
		rec.Steps = append(rec.Steps, r)
		rec.Max += item.pts
		if results != nil {
			results = append(results, nil)
			notes = append(notes, nil)
		}
	}
	for i := range rec.Steps {
		if results != nil && results[i] != nil {
			g.fold(&rec.Steps[i], rec, results[i], notes[i])
		}
		rec.Score = report.Round(rec.Score + rec.Steps[i].Score)
		if rec.Problem != "" {
			rec.Steps[i].Output = "Not run: " + rec.Problem
		}
	}
	rec.Took = seconds(time.Since(t0))
	// Tidy: an empty logs dir, and the built executables when nothing needs replaying.
	os.Remove(filepath.Join(dir, "logs"))
	if sub.Kind == KindModule && rec.Problem == "" && rec.Passed() == len(rec.Steps) {
		os.RemoveAll(rec.Bin)
		rec.Bin = ""
	}
	rec = cleanRecord(rec)
	err = errors.Join(
		report.WriteFile(filepath.Join(dir, "results.json"), func(w io.Writer) error { return report.EncodeGradescope(w, rec.Gradescope(g.cfg.Scheme)) }),
		report.WriteFile(filepath.Join(dir, "junit.xml"), func(w io.Writer) error { return WriteJUnit(w, rec) }),
	)
	if results != nil && err == nil {
		var reps []result.Result
		for _, runs := range results {
			if runs != nil {
				reps = append(reps, CleanResult(representative(runs)))
			}
		}
		err = report.WriteFile(filepath.Join(dir, "report.html"), func(w io.Writer) error {
			return report.WriteHTML(w, report.HTMLReport{Title: "snacklab grade: " + sub.Name + " (" + g.mode + ")", Bin: rec.Bin, When: time.Now(),
				Took: time.Since(t0), Results: reps})
		})
	}
	return rec, err
}

// buildModule checks a module's source tree, then builds it inside the
// boundary, or on this machine in the unisolated mode. failure is the
// submission's problem, err the grader's.
func (g *grader) buildModule(ctx context.Context, src, bin string) (out, failure string, err error) {
	if err := CheckSource(src); err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrSource.Error()+": ")
		return msg, "the build was refused: " + msg, nil
	}
	warmed, err := g.waitWarm(ctx)
	if err != nil {
		return "", "", err
	}
	defer warmed()
	if b := g.cfg.Boundary; b != nil && b.Build != nil {
		out, failure, err := b.Build(ctx, src, bin, g.cfg.BuildTimeout)
		if failure != "" {
			failure = "the build failed: " + firstError(out, errors.New(failure))
		}
		return trimBuildOutput(g.student(out, src)), failure, err
	}
	out, err = g.build(ctx, src, bin)
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	if err != nil {
		return g.student(out, src), "the build failed: " + g.student(firstError(out, err), src), nil
	}
	return "", "", nil
}

// waitWarm returns once the build cache is warm. Isolated, the first
// caller runs the boundary's trusted warming build and the others wait for
// it; no submission's build waits for another's. Unisolated (--trusted,
// code the teacher trusts), the first submission's build warms the cache
// and the others wait for it, as they share the host's cache and would
// otherwise compile the same dependencies side by side. The caller calls
// warmed once its own build is done.
func (g *grader) waitWarm(ctx context.Context) (warmed func(), err error) {
	nothing := func() {}
	b := g.cfg.Boundary
	if b != nil && b.Warm == nil {
		return nothing, nil
	}
	if g.first.CompareAndSwap(false, true) {
		if b == nil {
			return func() { close(g.warm) }, nil
		}
		t0 := time.Now()
		err := b.Warm(ctx)
		close(g.warm)
		if err != nil && ctx.Err() == nil {
			// A cold cache is slower, not wrong: every build still runs
			// within its own limit.
			g.logf("warming the build cache failed after %v (the builds start cold): %v\n", time.Since(t0).Round(time.Millisecond), err)
		}
		return nothing, ctx.Err()
	}
	select {
	case <-g.warm:
		return nothing, nil
	case <-ctx.Done():
		return nothing, ctx.Err()
	}
}

// runAll runs every graded step cfg.Runs times; each run's work dirs go
// under logRoot (logRoot/run-K when there are several runs).
func (g *grader) runAll(ctx context.Context, name, bin, logRoot string) ([][]result.Result, [][]string) {
	steps := g.cfg.Points.Steps()
	results := make([][]result.Result, len(steps))
	notes := make([][]string, len(steps))
	for i := range steps {
		results[i] = make([]result.Result, g.cfg.Runs)
	}
	par := g.cfg.Parallel
	if par <= 0 {
		par = len(steps)
	}
	for run := range g.cfg.Runs {
		if b := g.cfg.Boundary; b != nil {
			rs, err := b.Run(ctx, bin, steps, g.cfg.StepTimeout, g.cfg.Parallel)
			if err == nil && len(rs) != len(steps) {
				err = fmt.Errorf("isolated run reported %d steps, want %d", len(rs), len(steps))
			}
			for i, s := range steps {
				if err != nil {
					results[i][run] = result.Result{Step: s.Step, Problem: "grader: " + err.Error()}
				} else {
					results[i][run] = rs[i]
				}
			}
			continue
		}
		root := logRoot
		if g.cfg.Runs > 1 {
			root = filepath.Join(logRoot, fmt.Sprintf("run-%d", run+1))
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			for i, s := range steps {
				results[i][run] = result.Result{Step: s.Step, Problem: "grader: " + err.Error()}
			}
			continue
		}
		var eg errgroup.Group
		eg.SetLimit(par)
		for i, s := range steps {
			eg.Go(func() error {
				r, n := g.runIsolated(ctx, bin, s, root, fmt.Sprintf("%s-run%d-step%d", name, run+1, s.Num))
				results[i][run] = r
				for _, x := range n {
					notes[i] = append(notes[i], fmt.Sprintf("run %d: %s", run+1, x))
				}
				return nil
			})
		}
		eg.Wait()
		g.tidyLogs(root)
		os.Remove(root) // only when empty: every step passed
	}
	return results, notes
}

// fold sums up one step's runs: points only when every run passed. The
// step's Output is what the learner sees: no path of the grading machine,
// and the command that re-runs the step on the learner's own machine. The
// teacher's replay command and the kept work dirs go to Replay and Kept
// (extra_data in results.json, and the teacher's cohort reports).
func (g *grader) fold(s *StepRecord, rec Record, runs []result.Result, notes []string) {
	s.Runs = len(runs)
	var firstFail *result.Result
	for i := range runs {
		r := &runs[i]
		s.Took = max(s.Took, seconds(r.Took))
		if r.Pass {
			s.Passes++
			continue
		}
		if firstFail == nil {
			firstFail = r
		}
		if r.Dir != "" {
			s.Kept = append(s.Kept, r.Dir)
		}
	}
	s.Flaky = s.Passes > 0 && s.Passes < s.Runs
	dirs := []string{rec.Bin, rec.Source}
	for _, r := range runs {
		dirs = append(dirs, r.LogDir, r.Dir)
	}
	s.Score, s.Parts = g.scoreParts(*s, runs, dirs)
	rep := representative(runs)
	var b strings.Builder
	if s.Runs > 1 {
		fmt.Fprintf(&b, "Passed %d of %d runs.", s.Passes, s.Runs)
		if s.Flaky {
			b.WriteString(" Flaky: the parts that fail in some runs have a bug the other runs did not hit, and score 0.")
		}
		b.WriteString("\n")
	}
	b.WriteString(g.student(rep.Output(), dirs...))
	if firstFail != nil {
		s.Reason = g.student(reason(*firstFail), dirs...)
		s.Replay = g.replay(rec, s.Num)
		fmt.Fprintf(&b, "Re-run on your machine: %s\n", StudentReplay(s.Num))
	}
	for _, n := range notes {
		b.WriteString("Grader: " + n + "\n")
		// What the grader had to do to the step's processes concerns its
		// parts too: the first, and every one that did not pass.
		for i := range s.Parts {
			if i == 0 || s.Parts[i].Status() != "passed" {
				s.Parts[i].Output += "Grader: " + n + "\n"
			}
		}
	}
	s.Output = b.String()
}

// scoreParts scores a step's parts over its runs (report.ScoreRuns): the
// step's points split by the scheme's weights, each part's output the
// learner's (no path of the grading machine, the replay command).
func (g *grader) scoreParts(s StepRecord, runs []result.Result, dirs []string) (float64, []PartRecord) {
	step := result.Step{Num: s.Num, Slug: s.Slug, Title: s.Title}
	if len(runs) > 0 {
		step = runs[0].Step
	}
	scored := report.ScoreRuns(step, runs, s.Points, g.cfg.Scheme)
	total := 0.0
	var parts []PartRecord
	for _, p := range scored {
		total += p.Score
		if p.ID == "" {
			continue // a step without parts is one test: the StepRecord itself
		}
		pr := PartRecord{ID: p.ID, Name: p.Name, Points: p.Points, Score: p.Score, Passes: p.Passes, Runs: p.Runs,
			Visibility: g.cfg.Scheme.VisibilityOf(s.Num, p.ID)}
		var causes []string
		for _, c := range p.Failures {
			causes = append(causes, c.Cause())
			for _, id := range c.Clause {
				if !slices.Contains(pr.Clauses, id) {
					pr.Clauses = append(pr.Clauses, id)
				}
			}
		}
		if p.Problem != "" {
			causes = append(causes, firstLine(p.Problem))
		}
		pr.Reason = g.student(oneLine(strings.Join(causes, "; "), 600), dirs...)
		out := g.student(p.Explain(), dirs...)
		if p.Status() != "passed" {
			out += fmt.Sprintf("Re-run on your machine: %s\n", StudentReplay(s.Num))
		}
		pr.Output = out + "Why: " + step.Why + "\n"
		parts = append(parts, pr)
	}
	return report.Round(total), parts
}

// StudentReplay is the command a learner runs to re-run step n on their
// own machine, in their copy of the module.
func StudentReplay(n int) string {
	return fmt.Sprintf("./run-lab.sh %d  (or: lab run --bin DIR %d, DIR holding your queuectl, sender and receiver)", n, n)
}

// replay is the teacher's command that replays step n of a submission the
// way it was graded: isolated again when it was graded isolated (the
// submission's programs never run on the host), else `lab run`.
func (g *grader) replay(rec Record, n int) string {
	if g.cfg.Boundary != nil {
		return fmt.Sprintf("%s grade --out %s --points %d=1 %s", g.cfg.Lab, shellQuote(filepath.Join(os.TempDir(), "replay-"+rec.Name)), n, shellQuote(rec.Source))
	}
	return fmt.Sprintf("%s run --bin %s %d", g.cfg.Lab, shellQuote(rec.Bin), n)
}

// workDirRE matches the path of a step's work dir, on this machine or in
// a grading container (/work/snacklab-step7-1234).
var workDirRE = regexp.MustCompile(`(?:/[^\s'"/:]+)*/snacklab-step\d+-[^\s'"/:]+/?`)

// student rewrites text for the learner's eyes: the paths of the grading
// machine — the step's work dir, the bin dir, the submission's own path,
// the output dir, the grader's temp dir, the container's /sub — become
// relative names, and the line pointing at the logs (which stay on the
// grading machine) goes.
func (g *grader) student(text string, dirs ...string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "logs:") {
			continue
		}
		keep = append(keep, l)
	}
	text = strings.Join(keep, "\n")
	dirs = append(dirs, g.cfg.Out, g.tmp, "/sub", "/src")
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		if d == "" || d == "/" {
			continue
		}
		// Only a whole path: at the start of a word, ending at a separator.
		re := regexp.MustCompile(`(^|[\s'"(=:])` + regexp.QuoteMeta(d) + `(/|$|[\s'"):,;])`)
		text = re.ReplaceAllStringFunc(text, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if sub[2] == "/" {
				return sub[1]
			}
			return sub[1] + "." + sub[2]
		})
	}
	return workDirRE.ReplaceAllString(text, "")
}

// representative is the run a report shows: the first failing one, else the last.
func representative(runs []result.Result) result.Result {
	for _, r := range runs {
		if !r.Pass {
			return r
		}
	}
	return runs[len(runs)-1]
}

// reason says in one line why a run failed: every failure's plain cause.
func reason(r result.Result) string {
	var causes []string
	for _, c := range r.Failures() {
		causes = append(causes, c.Cause())
	}
	if r.Problem != "" {
		causes = append(causes, r.Problem)
	}
	if len(causes) == 0 {
		return "no checks passed"
	}
	return oneLine(strings.Join(causes, "; "), 600)
}

// oneLine joins the lines of s and cuts it to about n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + " …"
	}
	return s
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// loadRecords reads the results.json of each named submission.
func loadRecords(out string, graded []string) ([]Record, error) {
	var recs []Record
	for _, n := range graded {
		r, err := ReadResults(filepath.Join(out, n, "results.json"))
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, nil
}

// runItem runs an extra item (crash, power cut) on a submission's
// executables: run itself when unisolated, the boundary's counterpart when
// it has one, and otherwise nothing (notRun is returned as it is).
func (g *grader) runItem(ctx context.Context, num int, run func(ctx context.Context, bin, work string, points float64, name string) StepRecord,
	bin, work string, points float64, name string, notRun StepRecord) (StepRecord, error) {
	b := g.cfg.Boundary
	switch {
	case b == nil:
		return run(ctx, bin, work, points, name), nil
	case num == CrashItem() && b.Crash != nil:
		return GradeCrashIn(ctx, b.Crash, bin, points, name)
	case num == PowerCutItem() && b.PowerCut != nil:
		return GradePowerCutIn(ctx, b.PowerCut, bin, points, name)
	}
	return notRun, nil
}

// percent is score/max as a percentage.
func percent(score, maxScore float64) string {
	if maxScore <= 0 {
		return "0"
	}
	return strconv.FormatFloat(100*score/maxScore, 'f', 1, 64)
}

// StepRunner converts a runner with the same shape under another name
// (isolate.LabRunner) to Boundary.Run's type.
func StepRunner[F ~func(context.Context, string, []labsteps.Step, time.Duration, int) ([]result.Result, error)](f F) func(context.Context, string, []labsteps.Step, time.Duration, int) ([]result.Result, error) {
	return f
}
