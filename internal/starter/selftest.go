package starter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"snacklab/internal/crash"
	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/result"
)

// NotImplemented is the phrase every failure of the learner's copy must show.
const NotImplemented = "not implemented"

// SelftestConfig says what `lab selftest` grades and how.
type SelftestConfig struct {
	Module      string        // the module root (the marked reference the mutants edit)
	Work        string        // parent of the copies and the steps' work dirs; "" is a temp dir
	Keep        bool          // keep the work dir
	Builds      int           // builds at once; 0 is the number of CPUs
	Labs        int           // steps at once (a run takes as many as it has); 0 is DefaultLabs
	Repeat      int           // runs of the lab per target; 0 is 1
	StepTimeout time.Duration // per step; 0 derives it from the calibration and the load, as `lab run` does
	Only        []string      // mutant and variant names; none means all of both
	// AllSteps runs every step against each mutant, not only those it
	// names, to list the other steps that reject it too (Outcome.Also).
	AllSteps bool
	// Progress receives a line as each target is built and as each is
	// graded ("[3/27] graded NAME ok (12.1s)").
	Progress func(format string, args ...any)
}

// Kinds of target.
const (
	KindReference = "reference"
	KindStarter   = "starter"
	KindMutant    = "mutant"
	// KindVariant is a correct answer the contract allows (NAME.variant):
	// like the reference, it must pass every step.
	KindVariant = "variant"
)

// Outcome is how one target fared.
type Outcome struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Comment string `json:"comment,omitempty"`
	Steps   []int  `json:"named_steps"` // the steps judged: all 8 for the reference and the starter
	// Clauses are a mutant's CONTRACT.md clauses: a step rejects it only
	// on a failed check that names one of them.
	Clauses []string `json:"clauses,omitempty"`
	Runs    int      `json:"runs"`       // lab runs that completed
	Rows    []Row    `json:"rows"`       // one per named step
	Also    []int    `json:"also_fails"` // mutants: other steps that failed in some run
	Passed  int      `json:"passed"`     // steps that passed in every run (the starter: in any run)
	OK      bool     `json:"ok"`         // as expected
	Error   string   `json:"error,omitempty"`
	BuildS  float64  `json:"build_s"`
	LabS    float64  `json:"lab_s"`
}

// Row is one named step of one target.
type Row struct {
	Step   int    `json:"step"`             // 0 with Crash
	Crash  string `json:"crash,omitempty"`  // a `lab crash` row: the programs enumerated
	Want   string `json:"want"`             // "pass", "not implemented", "reject"
	Result string `json:"result"`           // "passed 3/3", "rejected 3/3", "passed 1/3"…
	OK     bool   `json:"ok"`               // as expected in every run
	Check  string `json:"check,omitempty"`  // the check that failed (first failing run)
	Detail string `json:"detail,omitempty"` // when not OK: the step's detail from an offending run
}

// SelftestReport is the whole self-test.
type SelftestReport struct {
	OK        bool      `json:"ok"`
	TookS     float64   `json:"took_s"`
	Module    string    `json:"module"`
	Work      string    `json:"work,omitempty"` // kept work dir
	Reference Outcome   `json:"reference"`
	Starter   Outcome   `json:"starter"`
	Mutants   []Outcome `json:"mutants"`
	Variants  []Outcome `json:"variants"`
	Summary   string    `json:"summary"`
	// AllSteps says every step ran against each mutant, so Also lists
	// every other step that rejected it; otherwise only the named steps ran.
	AllSteps bool `json:"all_steps"`
}

type target struct {
	out   *Outcome
	run   []int // the steps its lab runs have: its named steps, or all
	build func(ctx context.Context, dir string) (bin string, err error)
	bin   string // once built
}

// Selftest grades the reference (every step passes), the learner's copy
// (every step fails saying "not implemented") and every mutant (rejected by
// each step it names), building in parallel, at most cfg.Builds at once,
// and grading at most cfg.Labs at once. The reference is built first: a
// mutant rebuilds only the programs built from the files it edits and
// takes the reference's executables for the others.
func Selftest(ctx context.Context, cfg SelftestConfig) (*SelftestReport, error) {
	t0 := time.Now()
	cfg = cfg.withDefaults()
	all, variants, err := selectTargets(cfg.Only)
	if err != nil {
		return nil, err
	}
	// Malformed markers are refused before anything is built.
	if _, err := ScanModule(cfg.Module); err != nil {
		return nil, err
	}
	files, err := listProgramFiles(ctx, cfg.Module)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Work, "snacklab-selftest-*")
	if err != nil {
		return nil, err
	}
	rep := &SelftestReport{Module: cfg.Module, AllSteps: cfg.AllSteps}
	if cfg.Keep {
		rep.Work = work
	} else {
		defer os.RemoveAll(work)
	}
	ref, others := targets(cfg, rep, all, variants, files)
	if err := buildAndGrade(ctx, cfg, work, all, ref, others); err != nil {
		return nil, err
	}
	rep.finish(time.Since(t0))
	return rep, nil
}

// withDefaults fills the zero fields of cfg.
func (cfg SelftestConfig) withDefaults() SelftestConfig {
	if cfg.Builds <= 0 {
		cfg.Builds = runtime.NumCPU()
	}
	if cfg.Labs <= 0 {
		cfg.Labs = DefaultLabs
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	return cfg
}

// DefaultLabs is how many steps a self-test runs at once by default: a
// mutant's run has only the steps it names (one, mostly) and takes that many
// slots, so eight such runs load the machine about as much as one run of
// all eight steps, which takes all eight.
const DefaultLabs = 8

// selectTargets is every mutant and variant, or those named in only, in
// that order.
func selectTargets(only []string) (muts, variants []mutants.Mutant, err error) {
	all, err := mutants.All()
	if err != nil {
		return nil, nil, err
	}
	vs, err := mutants.Variants()
	if err != nil || len(only) == 0 {
		return all, vs, err
	}
	for _, name := range only {
		byName := func(m mutants.Mutant) bool { return m.Name == name }
		if i := slices.IndexFunc(all, byName); i >= 0 {
			muts = append(muts, all[i])
		} else if i := slices.IndexFunc(vs, byName); i >= 0 {
			variants = append(variants, vs[i])
		} else {
			return nil, nil, fmt.Errorf("no mutant or variant %q (see labsteps/mutants/*.mutant, *.variant)", name)
		}
	}
	return muts, variants, nil
}

// targets makes the reference's target and the others (the starter, then
// each mutant, then each variant), each with an Outcome in rep.
func targets(cfg SelftestConfig, rep *SelftestReport, all, variants []mutants.Mutant, files programFiles) (ref *target, others []*target) {
	var every []int
	for _, s := range labsteps.Steps() {
		every = append(every, s.Num)
	}
	rep.Reference = Outcome{Name: "reference", Kind: KindReference, Steps: every, Rows: []Row{}, Also: []int{},
		Comment: "the reference with its solution markers stripped"}
	rep.Starter = Outcome{Name: "starter", Kind: KindStarter, Steps: every, Rows: []Row{}, Also: []int{},
		Comment: "the learner's copy written by `lab starter`"}
	rep.Mutants = make([]Outcome, len(all))
	ref = &target{out: &rep.Reference, run: every, build: func(ctx context.Context, dir string) (string, error) {
		src := filepath.Join(dir, "src")
		if err := mutants.CopyModule(cfg.Module, src); err != nil {
			return "", err
		}
		if _, err := StripModule(src); err != nil {
			return "", err
		}
		return build(ctx, src, dir)
	}}
	others = append(others, &target{out: &rep.Starter, run: every, build: func(ctx context.Context, dir string) (string, error) {
		c, err := Plan(cfg.Module)
		if err != nil {
			return "", err
		}
		src := filepath.Join(dir, "src")
		if err := c.Write(src); err != nil {
			return "", err
		}
		return build(ctx, src, dir)
	}})
	for i, m := range all {
		rep.Mutants[i] = Outcome{Name: m.Name, Kind: KindMutant, Comment: m.Comment, Steps: m.Steps, Clauses: m.Clauses, Rows: []Row{}, Also: []int{}}
		run := m.Steps
		if cfg.AllSteps {
			run = every
		}
		others = append(others, &target{out: &rep.Mutants[i], run: run, build: func(ctx context.Context, dir string) (string, error) {
			return buildMutant(ctx, cfg.Module, dir, m, files, ref.bin)
		}})
	}
	rep.Variants = make([]Outcome, len(variants))
	for i, m := range variants {
		rep.Variants[i] = Outcome{Name: m.Name, Kind: KindVariant, Comment: m.Comment, Steps: every, Clauses: m.Clauses, Rows: []Row{}, Also: []int{}}
		others = append(others, &target{out: &rep.Variants[i], run: every, build: func(ctx context.Context, dir string) (string, error) {
			return buildMutant(ctx, cfg.Module, dir, m, files, ref.bin)
		}})
	}
	return ref, others
}

// buildAndGrade builds the reference, then the other targets at most
// cfg.Builds at once, and grades each as it is built, at most cfg.Labs
// steps at once: a mutant's run of one step takes one of the cfg.Labs
// slots, a run of all eight steps (the reference, a variant) takes eight,
// so eight variants never run 64 steps at once on a machine sized for
// eight. (Under that load a receiver bounding its clients at one second,
// as the contract allows, cut the lab's requests.)
func buildAndGrade(ctx context.Context, cfg SelftestConfig, work string, all []mutants.Mutant, ref *target, others []*target) error {
	built := make(chan *target, len(others)+1)
	total := len(others) + 1
	var graders sync.WaitGroup
	var graded atomic.Int32
	slots := semaphore.NewWeighted(int64(cfg.Labs))
	for range cfg.Labs {
		graders.Go(func() {
			for t := range built {
				weight := int64(min(max(len(t.run), 1), cfg.Labs))
				if err := slots.Acquire(ctx, weight); err != nil {
					t.out.Error = err.Error()
					continue
				}
				t1 := time.Now()
				dir := filepath.Join(work, t.out.Name)
				if len(t.run) > 0 {
					grade(ctx, cfg, t.out, t.bin, dir, t.run)
				} else {
					t.out.OK = t.out.Error == "" // no step to run: its crash or power-cut rows decide
				}
				if crashes := crashPrograms(t.out, all, false); len(crashes) > 0 {
					gradeCrash(ctx, t.out, t.bin, dir, crashes, 0)
				}
				if crashes, n := crashPrograms(t.out, all, true), crashBatch(t.out, all); len(crashes) > 0 {
					gradeCrash(ctx, t.out, t.bin, dir, crashes, n)
				}
				if cuts := powerCutPrograms(t.out, all); len(cuts) > 0 {
					gradePowerCut(ctx, t.out, t.bin, dir, cuts)
				}
				t.out.LabS = time.Since(t1).Seconds()
				slots.Release(weight)
				cfg.Progress("selftest: [%d/%d] graded %-28s %s (%.1fs)", graded.Add(1), total, t.out.Name, verdict(*t.out), t.out.LabS)
			}
		})
	}
	buildOne := func(t *target) {
		t1 := time.Now()
		bin, err := t.build(ctx, filepath.Join(work, t.out.Name))
		t.out.BuildS = time.Since(t1).Seconds()
		if err != nil {
			t.out.Error = "build: " + err.Error()
			cfg.Progress("selftest: %s did not build: %v", t.out.Name, err)
			return
		}
		cfg.Progress("selftest: built %-30s (%.1fs)", t.out.Name, t.out.BuildS)
		t.bin = bin
		built <- t
	}
	// The mutants take the reference's executables for the programs they
	// do not change, so it is built before them.
	buildOne(ref)
	var g errgroup.Group
	g.SetLimit(cfg.Builds)
	for _, t := range others {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if ref.bin == "" && (t.out.Kind == KindMutant || t.out.Kind == KindVariant) {
				t.out.Error = "build: not built: the reference did not build"
				return nil
			}
			buildOne(t)
			return nil
		})
	}
	gerr := g.Wait()
	close(built)
	graders.Wait()
	if gerr != nil {
		return gerr
	}
	return ctx.Err()
}

// finish fills the verdict and the summary line once every target is graded.
func (rep *SelftestReport) finish(took time.Duration) {
	rep.OK = rep.Reference.OK && rep.Starter.OK
	rejected := 0
	for _, m := range rep.Mutants {
		if m.OK {
			rejected++
		}
		rep.OK = rep.OK && m.OK
	}
	passed := 0
	for _, v := range rep.Variants {
		if v.OK {
			passed++
		}
		rep.OK = rep.OK && v.OK
	}
	rep.TookS = took.Seconds()
	rep.Summary = fmt.Sprintf("selftest: %d/%d mutants rejected, %d/%d variants passed, reference %d/%d, starter %d/%d",
		rejected, len(rep.Mutants), passed, len(rep.Variants), rep.Reference.Passed, len(rep.Reference.Steps), rep.Starter.Passed, len(rep.Starter.Steps))
}

func build(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "bin")
	return bin, mutants.BuildPrograms(ctx, src, bin)
}

// buildMutant applies m to a copy of the module and builds the programs
// whose files it edits; the others are the reference's executables in
// refBin, linked (or copied) beside them. Building three programs is mostly
// three links, so a mutant of the receiver costs one.
func buildMutant(ctx context.Context, module, dir string, m mutants.Mutant, files programFiles, refBin string) (string, error) {
	progs := files.touchedBy(m.Files())
	if len(progs) == 0 {
		return "", fmt.Errorf("mutant %s edits %s, from which no program of the contract is built: it is the reference",
			m.Name, strings.Join(m.Files(), ", "))
	}
	if err := m.Apply(ctx, module, dir); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin")
	if err := mutants.BuildPrograms(ctx, filepath.Join(dir, "src"), bin, progs...); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	for _, p := range mutants.Programs {
		if slices.Contains(progs, p) {
			continue
		}
		name := path.Base(p)
		if err := linkOrCopy(filepath.Join(refBin, name), filepath.Join(bin, name)); err != nil {
			return "", err
		}
	}
	return bin, nil
}

// linkOrCopy makes dst the same executable as src.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// programFiles maps each program of the contract (mutants.Programs) to the
// module's files its build reads: the Go and embedded files of every
// package of the module it imports, as slash paths from the module root.
type programFiles map[string]map[string]bool

// listProgramFiles asks the go command which files each program is built from.
func listProgramFiles(ctx context.Context, module string) (programFiles, error) {
	out := programFiles{}
	for _, prog := range mutants.Programs {
		cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", prog)
		cmd.Dir = module
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s: %w", prog, err)
		}
		set := map[string]bool{}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var pkg struct {
				Dir                 string
				GoFiles, EmbedFiles []string
				Module              *struct{ Dir string }
			}
			if err := dec.Decode(&pkg); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list -deps %s: %w", prog, err)
			}
			if pkg.Module == nil || pkg.Module.Dir != module {
				continue
			}
			for _, f := range append(pkg.GoFiles, pkg.EmbedFiles...) {
				rel, err := filepath.Rel(module, filepath.Join(pkg.Dir, f))
				if err != nil {
					return nil, err
				}
				set[filepath.ToSlash(rel)] = true
			}
		}
		out[prog] = set
	}
	return out, nil
}

// touchedBy lists the programs built from any of files, in mutants.Programs' order.
func (pf programFiles) touchedBy(files []string) []string {
	var progs []string
	for _, p := range mutants.Programs {
		for _, f := range files {
			if pf[p][f] {
				progs = append(progs, p)
				break
			}
		}
	}
	return progs
}

// grade runs the lab against one built target cfg.Repeat times and judges
// the results by the target's kind.
func grade(ctx context.Context, cfg SelftestConfig, out *Outcome, bin, dir string, nums []int) {
	lab := labsteps.Config{Bin: bin, WorkRoot: filepath.Join(dir, "steps"), StepTimeout: cfg.StepTimeout, Keep: cfg.Keep}
	if err := os.MkdirAll(lab.WorkRoot, 0o755); err != nil {
		out.Error = err.Error()
		return
	}
	var steps []labsteps.Step
	for _, s := range labsteps.Steps() {
		if slices.Contains(nums, s.Num) {
			steps = append(steps, s)
		}
	}
	runs := make([][]result.Result, 0, cfg.Repeat)
	for range cfg.Repeat {
		if ctx.Err() != nil {
			out.Error = ctx.Err().Error()
			return
		}
		runs = append(runs, labsteps.RunSteps(ctx, lab, steps, nil))
	}
	judge(out, runs)
}

// judge fills out's rows, counts and verdict from the lab runs.
func judge(out *Outcome, runs [][]result.Result) {
	out.Runs = len(runs)
	n := len(runs)
	passedAll, passedAny, failedAny := stepOutcomes(runs)
	// Passed is what the summary line shows: for the starter, whose steps
	// must all fail, a step that passed in any run counts against it.
	count := passedAll
	if out.Kind == KindStarter {
		count = passedAny
	}
	for _, ok := range count {
		if ok {
			out.Passed++
		}
	}
	out.Rows = []Row{}
	out.OK = n > 0 && out.Error == ""
	for _, step := range out.Steps {
		row := Row{Step: step}
		good := 0
		var bad *result.Result
		offClause := "" // why a failed check did not count
		for _, run := range runs {
			r := findStep(run, step)
			var ok bool
			switch out.Kind {
			case KindReference, KindVariant:
				ok = r != nil && r.Pass
			case KindStarter:
				ok = r != nil && !r.Pass && strings.Contains(r.Detail(), NotImplemented)
			default:
				c, note := rejectedOnClause(r, out.Clauses)
				if ok = c != nil; offClause == "" {
					offClause = note
				}
				if ok && row.Check == "" {
					row.Check = c.What
				}
			}
			if ok {
				good++
			} else if bad == nil && r != nil {
				rr := *r
				bad = &rr
			}
		}
		switch out.Kind {
		case KindReference, KindVariant:
			row.Want, row.Result = "pass", fmt.Sprintf("passed %d/%d", good, n)
		case KindStarter:
			row.Want, row.Result = NotImplemented, fmt.Sprintf("%s %d/%d", NotImplemented, good, n)
		default:
			row.Want, row.Result = "reject", fmt.Sprintf("rejected %d/%d", good, n)
		}
		row.OK = n > 0 && good == n
		if !row.OK && bad != nil {
			row.Detail = describe(*bad)
		}
		if !row.OK && offClause != "" {
			row.Detail = strings.TrimLeft(offClause+"\n"+row.Detail, "\n")
		}
		out.OK = out.OK && row.OK
		out.Rows = append(out.Rows, row)
	}
	out.Also = []int{}
	if out.Kind == KindMutant {
		for step := range failedAny {
			if !slices.Contains(out.Steps, step) {
				out.Also = append(out.Also, step)
			}
		}
		sort.Ints(out.Also)
	}
}

// stepOutcomes says, by step, whether it passed in every run, in any run,
// and failed in any run.
func stepOutcomes(runs [][]result.Result) (passedAll, passedAny, failedAny map[int]bool) {
	passedAll, passedAny, failedAny = map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, run := range runs {
		for _, r := range run {
			passedAll[r.Step.Num] = true
		}
	}
	for _, run := range runs {
		for _, r := range run {
			if r.Pass {
				passedAny[r.Step.Num] = true
			} else {
				passedAll[r.Step.Num] = false
				failedAny[r.Step.Num] = true
			}
		}
	}
	return passedAll, passedAny, failedAny
}

// rejectedOnClause reports whether a step's result rejects a mutant: it
// failed on a check (rejected) that names one of the mutant's clauses. A
// step's parts run at once and each ends at its own first failure, so any
// failed check of the step counts, not only the first in the report. The
// note says why the failed checks did not count.
func rejectedOnClause(r *result.Result, clauses []string) (*result.Check, string) {
	if r == nil || !rejected(*r) {
		return nil, ""
	}
	for i, c := range r.Checks {
		if !c.OK && !c.TimedOut && sharesClause(c.Clause, clauses) {
			return &r.Checks[i], ""
		}
	}
	return nil, offClauseNote(*r.Failed(), clauses)
}

// sharesClause reports whether a failed check names a clause the mutant
// breaks: a step that fails a wrong answer on some other clause has not
// shown that the check about the mutant's own clause can fail.
func sharesClause(check, mutant []string) bool {
	return slices.ContainsFunc(check, func(id string) bool { return slices.Contains(mutant, id) })
}

// offClauseNote says why a failed check did not count as the rejection.
func offClauseNote(c result.Check, mutant []string) string {
	named := "names no clause"
	if len(c.Clause) > 0 {
		named = "judges " + strings.Join(c.Clause, " ")
	}
	return fmt.Sprintf("failed on %q, which %s, none of the mutant's clauses (%s): a rejection counts only on a check of a clause the mutant breaks",
		c.What, named, strings.Join(mutant, " "))
}

// rejected: the step failed on one of its checks, not on a problem of the
// harness (a panic, a time limit), which would prove nothing about the mutant.
func rejected(r result.Result) bool {
	// A wait that ran out proves nothing about the answer: only a failed
	// check on what the program did counts as a rejection.
	return !r.Pass && r.Problem == "" && !r.TimedOut && r.Failed() != nil
}

func findStep(run []result.Result, num int) *result.Result {
	for i := range run {
		if run[i].Step.Num == num {
			return &run[i]
		}
	}
	return nil
}

func describe(r result.Result) string {
	if r.Pass {
		return "step " + strconv.Itoa(r.Step.Num) + " passed"
	}
	return strings.TrimRight(r.Summary()+"\n"+r.Detail(), "\n")
}

func verdict(o Outcome) string {
	switch {
	case o.Error != "":
		return "ERROR"
	case o.OK:
		return "ok"
	}
	return "NOT AS EXPECTED"
}

// WriteTable prints the report for a person: one row per target and named
// step, what was expected, what happened, and for mutants the other steps
// that also rejected them; then what went wrong, if anything; then the
// summary line.
func (rep *SelftestReport) WriteTable(w io.Writer) error {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	// ALSO FAILS only means something when every step ran (--all-steps).
	if rep.AllSteps {
		fmt.Fprintln(tw, "TARGET\tSTEP\tEXPECTED\tRESULT\tALSO FAILS\tWHAT")
	} else {
		fmt.Fprintln(tw, "TARGET\tSTEP\tEXPECTED\tRESULT\tWHAT")
	}
	line := func(o Outcome, step, want, result string, also []int, what string) {
		if !rep.AllSteps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, step, want, result, what)
			return
		}
		a := "-"
		if len(also) > 0 {
			a = joinInts(also)
		}
		if o.Kind != KindMutant {
			a = ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, step, want, result, a, what)
	}
	for _, o := range rep.all() {
		switch {
		case o.Error != "":
			line(o, joinInts(o.Steps), wantOf(o), "ERROR", nil, firstLine(o.Error))
		case o.Kind != KindMutant:
			// The reference and the starter in one row when all is well.
			var bad []string
			for _, r := range o.Rows {
				if !r.OK {
					bad = append(bad, rowStep(r))
				}
			}
			result := fmt.Sprintf("%d/%d as expected", len(o.Rows)-len(bad), len(o.Rows))
			if o.Runs > 1 {
				result += fmt.Sprintf(" (%d runs)", o.Runs)
			}
			if len(bad) > 0 {
				result += "; NOT: steps " + strings.Join(bad, ",")
			}
			steps := fmt.Sprintf("%d-%d", o.Steps[0], o.Steps[len(o.Steps)-1])
			if len(o.Rows) > len(o.Steps) {
				steps += ",crash"
			}
			line(o, steps, wantOf(o), result, nil, o.Comment)
		default:
			for i, r := range o.Rows {
				result, what := r.Result, o.Comment
				if !r.OK {
					result = "NOT " + result
				}
				if i > 0 {
					what = ""
				}
				line(o, rowStep(r), r.Want, result, o.Also, what)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(table.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n"))); err != nil {
			return err
		}
	}
	for _, o := range rep.all() {
		if o.Error != "" {
			fmt.Fprintf(w, "\n%s: %s\n", o.Name, o.Error)
		}
		for _, r := range o.Rows {
			if !r.OK && r.Detail != "" {
				fmt.Fprintf(w, "\n%s, step %s: want %s, got %s:\n%s\n", o.Name, rowStep(r), r.Want, r.Result, indentLines(r.Detail, "    "))
			}
		}
	}
	if rep.Work != "" {
		fmt.Fprintf(w, "work dir kept: %s\n", rep.Work)
	}
	fmt.Fprintf(w, "took %.1fs\n", rep.TookS)
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

// all is every outcome, in the order the table lists them.
func (rep *SelftestReport) all() []Outcome {
	return slices.Concat([]Outcome{rep.Reference, rep.Starter}, rep.Mutants, rep.Variants)
}

func wantOf(o Outcome) string {
	switch o.Kind {
	case KindReference, KindVariant:
		return "pass"
	case KindStarter:
		return NotImplemented
	}
	return "reject"
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func rowStep(r Row) string {
	if strings.HasPrefix(r.Crash, "power cut") {
		return "powercut"
	}
	if r.Crash != "" {
		return "crash"
	}
	return strconv.Itoa(r.Step)
}

// crashPrograms is what `lab crash` must enumerate for a target: a
// mutant's "# crash:" programs; for the reference, every program some
// selected mutant names (the crash checks must pass it in the same run);
// nothing for the starter. batched picks the mutants with "# batch: N"
// (enumerated with --batch, crashBatch), or those without.
func crashPrograms(out *Outcome, all []mutants.Mutant, batched bool) []string {
	var progs []string
	for _, m := range all {
		if out.Kind == KindMutant && m.Name != out.Name || (m.Batch > 1) != batched {
			continue
		}
		for _, p := range m.Crash {
			if !slices.Contains(progs, p) {
				progs = append(progs, p)
			}
		}
	}
	if out.Kind == KindStarter || out.Kind == KindVariant {
		return nil
	}
	return progs
}

// crashBatch is the --batch of a target's batched crash run: the largest
// "# batch: N" of the mutants crashPrograms(…, true) takes programs from.
func crashBatch(out *Outcome, all []mutants.Mutant) int {
	n := 0
	for _, m := range all {
		if out.Kind != KindMutant || m.Name == out.Name {
			n = max(n, m.Batch)
		}
	}
	return n
}

// gradeCrash runs `lab crash`'s enumeration (no soak) of progs against a
// built target, with --batch batch when above 1, and adds its row: the
// reference must show no violation, a mutant at least one. The enumeration
// is deterministic (every crash point in turn), so one run proves it.
func gradeCrash(ctx context.Context, out *Outcome, bin, dir string, progs []string, batch int) {
	row := Row{Crash: strings.Join(progs, ","), Want: "reject"}
	if batch > 1 {
		row.Crash += fmt.Sprintf(" --batch %d", batch)
	}
	if out.Kind == KindReference {
		row.Want = "pass"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		out.Error = err.Error()
		return
	}
	rep, err := crash.Run(ctx, crash.Config{Bin: bin, Work: dir, Programs: progs, Batch: batch})
	switch {
	case err != nil:
		row.Result = "error"
		row.Detail = err.Error()
	case out.Kind == KindReference:
		row.OK = rep.OK
		row.Result = fmt.Sprintf("%d violation(s) in %d crash points", len(rep.Violations), len(rep.Points))
	default:
		row.OK = len(rep.Violations) > 0
		row.Result = fmt.Sprintf("rejected: %d violation(s) in %d crash points", len(rep.Violations), len(rep.Points))
		if !row.OK {
			row.Result = fmt.Sprintf("0 violations in %d crash points", len(rep.Points))
		}
	}
	if err == nil && len(rep.Violations) > 0 {
		v := rep.Violations[0]
		row.Check = v.Invariant
		if !row.OK || out.Kind != KindReference {
			row.Detail = fmt.Sprintf("%s at crash point %d (%s): %s: %s", v.Program, v.N, v.Call, v.Invariant, v.Detail)
		}
	}
	if err == nil && !row.OK && row.Detail == "" {
		var b strings.Builder
		rep.WriteText(&b)
		row.Detail = b.String()
	}
	out.Rows = append(out.Rows, row)
	out.OK = out.OK && row.OK
}
