package starter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
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

	"snacklab/internal/crash"
	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
)

// NotImplemented is the phrase every failure of the learner's copy must show.
const NotImplemented = "not implemented"

// SelftestConfig says what `lab selftest` grades and how.
type SelftestConfig struct {
	Module      string        // the module root (the marked reference and the patches' base)
	Work        string        // parent of the copies and the steps' work dirs; "" is a temp dir
	Keep        bool          // keep the work dir
	Builds      int           // builds at once; 0 is the number of CPUs
	Labs        int           // lab runs (8 steps each) at once; 0 is 2
	Repeat      int           // runs of the lab per target; 0 is 1
	StepTimeout time.Duration // per step; 0 is 60s
	Only        []string      // mutant names; none means all
	// Progress receives a line as each target is built and as each is
	// graded ("[3/27] graded NAME ok (12.1s)").
	Progress func(format string, args ...any)
}

// Kinds of target.
const (
	KindReference = "reference"
	KindStarter   = "starter"
	KindMutant    = "mutant"
)

// Outcome is how one target fared.
type Outcome struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"`
	Comment string  `json:"comment,omitempty"`
	Steps   []int   `json:"named_steps"` // the steps judged: all 8 for the reference and the starter
	Runs    int     `json:"runs"`        // lab runs that completed
	Rows    []Row   `json:"rows"`        // one per named step
	Also    []int   `json:"also_fails"`  // mutants: other steps that failed in some run
	Passed  int     `json:"passed"`      // steps that passed in every run (the starter: in any run)
	OK      bool    `json:"ok"`          // as expected
	Error   string  `json:"error,omitempty"`
	BuildS  float64 `json:"build_s"`
	LabS    float64 `json:"lab_s"`
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
	Summary   string    `json:"summary"`
}

type target struct {
	out   *Outcome
	build func(ctx context.Context, dir string) (bin string, err error)
	bin   string // once built
}

// Selftest grades the reference (every step passes), the learner's copy
// (every step fails saying "not implemented") and every mutant (rejected by
// each step it names), building in parallel, at most cfg.Builds at once,
// and grading at most cfg.Labs at once.
func Selftest(ctx context.Context, cfg SelftestConfig) (*SelftestReport, error) {
	t0 := time.Now()
	if cfg.Builds <= 0 {
		cfg.Builds = runtime.NumCPU()
	}
	if cfg.Labs <= 0 {
		cfg.Labs = 2
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = 1
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = time.Minute
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	all, err := mutants.All()
	if err != nil {
		return nil, err
	}
	if len(cfg.Only) > 0 {
		var sel []mutants.Mutant
		for _, name := range cfg.Only {
			i := slices.IndexFunc(all, func(m mutants.Mutant) bool { return m.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("no mutant %q (see labsteps/mutants/*.patch)", name)
			}
			sel = append(sel, all[i])
		}
		all = sel
	}
	// Malformed markers are refused before anything is built.
	if _, err := ScanModule(cfg.Module); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Work, "snacklab-selftest-*")
	if err != nil {
		return nil, err
	}
	rep := &SelftestReport{Module: cfg.Module}
	if cfg.Keep {
		rep.Work = work
	} else {
		defer os.RemoveAll(work)
	}

	var every []int
	for _, s := range labsteps.Steps() {
		every = append(every, s.Num)
	}
	rep.Reference = Outcome{Name: "reference", Kind: KindReference, Steps: every, Rows: []Row{}, Also: []int{},
		Comment: "the reference with its solution markers stripped"}
	rep.Starter = Outcome{Name: "starter", Kind: KindStarter, Steps: every, Rows: []Row{}, Also: []int{},
		Comment: "the learner's copy written by `lab starter`"}
	rep.Mutants = make([]Outcome, len(all))
	targets := []target{
		{out: &rep.Reference, build: func(ctx context.Context, dir string) (string, error) {
			src := filepath.Join(dir, "src")
			if err := mutants.CopyModule(cfg.Module, src); err != nil {
				return "", err
			}
			if _, err := StripModule(src); err != nil {
				return "", err
			}
			return build(ctx, src, dir)
		}},
		{out: &rep.Starter, build: func(ctx context.Context, dir string) (string, error) {
			c, err := Plan(cfg.Module)
			if err != nil {
				return "", err
			}
			src := filepath.Join(dir, "src")
			if err := c.Write(src); err != nil {
				return "", err
			}
			return build(ctx, src, dir)
		}},
	}
	for i, m := range all {
		rep.Mutants[i] = Outcome{Name: m.Name, Kind: KindMutant, Comment: m.Comment, Steps: m.Steps, Rows: []Row{}, Also: []int{}}
		targets = append(targets, target{out: &rep.Mutants[i], build: func(ctx context.Context, dir string) (string, error) {
			return m.Build(ctx, cfg.Module, dir)
		}})
	}

	// Builds run ahead, bounded; graders take each built target as it comes.
	built := make(chan target, len(targets))
	var graders sync.WaitGroup
	var graded atomic.Int32
	for range cfg.Labs {
		graders.Add(1)
		go func() {
			defer graders.Done()
			for t := range built {
				t1 := time.Now()
				grade(ctx, cfg, t.out, t.bin, filepath.Join(work, t.out.Name))
				if crashes := crashPrograms(t.out, all); len(crashes) > 0 {
					gradeCrash(ctx, t.out, t.bin, filepath.Join(work, t.out.Name), crashes)
				}
				t.out.LabS = time.Since(t1).Seconds()
				progress("selftest: [%d/%d] graded %-28s %s (%.1fs)", graded.Add(1), len(targets), t.out.Name, verdict(*t.out), t.out.LabS)
			}
		}()
	}
	var g errgroup.Group
	g.SetLimit(cfg.Builds)
	for _, t := range targets {
		g.Go(func() error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			t1 := time.Now()
			dir := filepath.Join(work, t.out.Name)
			bin, err := t.build(ctx, dir)
			t.out.BuildS = time.Since(t1).Seconds()
			if err != nil {
				t.out.Error = "build: " + err.Error()
				progress("selftest: %s did not build: %v", t.out.Name, err)
				return nil
			}
			progress("selftest: built %-30s (%.1fs)", t.out.Name, t.out.BuildS)
			t.bin = bin
			built <- t
			return nil
		})
	}
	gerr := g.Wait()
	close(built)
	graders.Wait()
	if gerr != nil {
		return nil, gerr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rep.OK = rep.Reference.OK && rep.Starter.OK
	rejected := 0
	for _, m := range rep.Mutants {
		if m.OK {
			rejected++
		}
		rep.OK = rep.OK && m.OK
	}
	rep.TookS = time.Since(t0).Seconds()
	rep.Summary = fmt.Sprintf("selftest: %d/%d mutants rejected, reference %d/%d, starter %d/%d",
		rejected, len(rep.Mutants), rep.Reference.Passed, len(every), rep.Starter.Passed, len(every))
	return rep, nil
}

func build(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "bin")
	return bin, mutants.BuildPrograms(ctx, src, bin)
}

// grade runs the lab against one built target cfg.Repeat times and judges
// the results by the target's kind.
func grade(ctx context.Context, cfg SelftestConfig, out *Outcome, bin, dir string) {
	lab := labsteps.Config{Bin: bin, WorkRoot: filepath.Join(dir, "steps"), StepTimeout: cfg.StepTimeout, Keep: cfg.Keep}
	if err := os.MkdirAll(lab.WorkRoot, 0o755); err != nil {
		out.Error = err.Error()
		return
	}
	steps := labsteps.Steps()
	runs := make([][]labsteps.Result, 0, cfg.Repeat)
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
func judge(out *Outcome, runs [][]labsteps.Result) {
	out.Runs = len(runs)
	n := len(runs)
	passedAll, passedAny, failedAny := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, s := range labsteps.Steps() {
		passedAll[s.Num] = n > 0
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
		var bad *labsteps.Result
		for _, run := range runs {
			r := findStep(run, step)
			var ok bool
			switch out.Kind {
			case KindReference:
				ok = r != nil && r.Pass
			case KindStarter:
				ok = r != nil && !r.Pass && strings.Contains(r.Detail(), NotImplemented)
			default:
				ok = r != nil && rejected(*r)
				if ok && row.Check == "" {
					row.Check = r.Failed().What
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
		case KindReference:
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

// rejected: the step failed on one of its checks, not on a problem of the
// harness (a panic, a time limit), which would prove nothing about the mutant.
func rejected(r labsteps.Result) bool {
	// A wait that ran out proves nothing about the answer: only a failed
	// check on what the program did counts as a rejection.
	return !r.Pass && r.Problem == "" && !r.TimedOut && r.Failed() != nil
}

func findStep(run []labsteps.Result, num int) *labsteps.Result {
	for i := range run {
		if run[i].Step.Num == num {
			return &run[i]
		}
	}
	return nil
}

func describe(r labsteps.Result) string {
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
	fmt.Fprintln(tw, "TARGET\tSTEP\tEXPECTED\tRESULT\tALSO FAILS\tWHAT")
	line := func(o Outcome, step, want, result string, also []int, what string) {
		a := "-"
		if len(also) > 0 {
			a = joinInts(also)
		}
		if o.Kind != KindMutant {
			a = ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, step, want, result, a, what)
	}
	for _, o := range append([]Outcome{rep.Reference, rep.Starter}, rep.Mutants...) {
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
	for _, o := range append([]Outcome{rep.Reference, rep.Starter}, rep.Mutants...) {
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

func wantOf(o Outcome) string {
	switch o.Kind {
	case KindReference:
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
	if r.Crash != "" {
		return "crash"
	}
	return strconv.Itoa(r.Step)
}

// crashPrograms is what `lab crash` must enumerate for a target: a
// mutant's "# crash:" programs; for the reference, every program some
// selected mutant names (the crash checks must pass it in the same run);
// nothing for the starter.
func crashPrograms(out *Outcome, all []mutants.Mutant) []string {
	var progs []string
	for _, m := range all {
		if out.Kind == KindMutant && m.Name != out.Name {
			continue
		}
		for _, p := range m.Crash {
			if !slices.Contains(progs, p) {
				progs = append(progs, p)
			}
		}
	}
	if out.Kind == KindStarter {
		return nil
	}
	return progs
}

// gradeCrash runs `lab crash`'s enumeration (no soak) of progs against a
// built target and adds its row: the reference must show no violation, a
// mutant at least one. The enumeration is deterministic (every crash point
// in turn), so one run proves it.
func gradeCrash(ctx context.Context, out *Outcome, bin, dir string, progs []string) {
	row := Row{Crash: strings.Join(progs, ","), Want: "reject"}
	if out.Kind == KindReference {
		row.Want = "pass"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		out.Error = err.Error()
		return
	}
	rep, err := crash.Run(ctx, crash.Config{Bin: bin, Work: dir, Programs: progs})
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
