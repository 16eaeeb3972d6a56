package starter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
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
