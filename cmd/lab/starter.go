package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"snacklab/internal/cliflag"
	"snacklab/internal/starter"
	"snacklab/labsteps/mutants"
)

const starterUsage = `usage: lab starter --out DIR [--module DIR]

Writes a learner's copy of the snacklab module into DIR (missing or empty):
every package, go.mod, go.sum, CONTRACT.md, docs and run-lab.sh, with each
part a learner writes (the regions marked BEGIN SOLUTION … END SOLUTION in
the reference) replaced by code that compiles and fails saying "not
implemented". Left out: .git and other dot directories, bin/, and the
mutants (labsteps/mutants/*.mutant). See docs/selftest.md.

flags:
`

// runStarter writes a learner's copy of the module.
func runStarter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab starter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "write the learner's copy into this `dir` (missing or empty; required)")
	module := fs.String("module", "", "the reference module `dir` (default: the module holding the current directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, starterUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return usageErr{fmt.Sprintf("starter: %v. Try: lab starter --out ../snacklab-starter", err)}
	}
	if fs.NArg() > 0 {
		return usageErr{fmt.Sprintf("starter: unexpected argument %q. Try: lab starter --out %s", fs.Arg(0), fs.Arg(0))}
	}
	if *out == "" {
		return usageErr{"starter: --out is required. Try: lab starter --out ../snacklab-starter"}
	}
	root, err := moduleRoot(*module)
	if err != nil {
		return usageErr{"starter: " + err.Error()}
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	notEmpty := func(err error) error {
		return usageErr{fmt.Sprintf("starter: %v; nothing written. Try: lab starter --out %s", err, filepath.Join(filepath.Dir(dir), "snacklab-starter-new"))}
	}
	if err := starter.CheckOut(dir); err != nil {
		return notEmpty(err)
	}
	c, err := starter.Plan(root)
	if err != nil {
		return fmt.Errorf("starter: %w", err)
	}
	if err := c.Write(dir); err != nil {
		if errors.Is(err, starter.ErrNotEmpty) {
			return notEmpty(err)
		}
		return fmt.Errorf("starter: %w (nothing left behind)", err)
	}
	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "starter: wrote %d files to %s (a learner's copy of %s)\n", len(c.Files), dir, root)
	fmt.Fprintf(w, "the parts to write (%d), each a TODO that fails saying %q until it is done,\n", len(c.Todos), starter.NotImplemented)
	fmt.Fprintln(w, "in this order (a step needs several parts; → names the steps that can pass once the parts down to it are done):")
	for i, t := range inOrder(c.Todos) {
		line := fmt.Sprintf("  %d. %-9s %-24s %-22s", i+1, t.Name, fmt.Sprintf("%s:%d", t.File, t.Line), t.Func)
		if o := todoOrder[t.Name]; o.steps != "" {
			line += " → " + o.steps
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w, "left out:")
	for _, l := range groupLeftOut(c.LeftOut) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "next: cd %s && ./run-lab.sh   (each step fails naming the part it tripped on; ./run-lab.sh claim runs one step)\n", dir)
	return w.Flush()
}

// todoOrder ranks the parts a learner writes so that steps start passing
// early, and says which steps can pass once the parts down to it are done
// (from what each step runs: steps 1, 3 and 4 drive queuectl's enqueue,
// claim and finish, and step 1 its backoff too; step 5 adds redrive; steps
// 2, 6, 7 and 8 start real senders and a receiver). Parts not listed go last.
var todoOrder = map[string]struct {
	rank  int
	steps string
}{
	"backoff":  {1, ""},
	"enqueue":  {2, ""},
	"claim":    {3, ""},
	"finish":   {4, "steps 1 retry, 3 claim, 4 finish can pass"},
	"redrive":  {5, "step 5 redrive"},
	"classify": {6, ""},
	"apply":    {7, ""},
	"run-once": {8, "steps 2 durable, 6 run-once, 7 race, 8 crash"},
	// Batched delivery is opt-in (sender --batch N): no lab step needs it.
	"claim-batch":  {9, ""},
	"finish-batch": {10, ""},
	"run-batch":    {11, "sender --batch N (optional; no step needs it)"},
}

// inOrder sorts todos by todoOrder, keeping the copy's order otherwise.
func inOrder(todos []starter.Todo) []starter.Todo {
	out := slices.Clone(todos)
	rank := func(t starter.Todo) int {
		if o, ok := todoOrder[t.Name]; ok {
			return o.rank
		}
		return len(todoOrder) + 1
	}
	slices.SortStableFunc(out, func(a, b starter.Todo) int { return rank(a) - rank(b) })
	return out
}

// groupLeftOut folds "path: why" lines with the same directory and reason
// into one: "labsteps/mutants/{a.mutant, b.mutant, … (22)}: why".
func groupLeftOut(lines []string) []string {
	type key struct{ dir, why string }
	var order []key
	names := map[key][]string{}
	for _, l := range lines {
		p, why, _ := strings.Cut(l, ": ")
		dir, name := "", p
		if i := strings.LastIndex(strings.TrimSuffix(p, "/"), "/"); i >= 0 {
			dir, name = p[:i+1], p[i+1:]
		}
		k := key{dir, why}
		if _, ok := names[k]; !ok {
			order = append(order, k)
		}
		names[k] = append(names[k], name)
	}
	var out []string
	for _, k := range order {
		n := names[k]
		switch {
		case len(n) == 1:
			out = append(out, k.dir+n[0]+": "+k.why)
		case len(n) <= 3:
			out = append(out, k.dir+"{"+strings.Join(n, ", ")+"}: "+k.why)
		default:
			out = append(out, fmt.Sprintf("%s{%s, … (%d files)}: %s", k.dir, strings.Join(n[:2], ", "), len(n), k.why))
		}
	}
	return out
}

// moduleRoot is dir, or the module holding the current directory, checked to
// be snacklab.
func moduleRoot(dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	root, err := mutants.ModuleRoot(dir)
	if err != nil {
		return "", fmt.Errorf("%v from %s: run it inside the snacklab module, or pass --module DIR", err, dir)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if strings.TrimSpace(first) != "module snacklab" {
		return "", fmt.Errorf("%s/go.mod is %q, not module snacklab: pass --module DIR", root, strings.TrimSpace(first))
	}
	return root, nil
}

const selftestUsage = `usage: lab selftest [flags] [MUTANT|VARIANT…]

Proves the lab's checks: grades the reference (every step must pass), the
learner's copy that ` + "`lab starter`" + ` writes (every step must fail saying "not
implemented"), every mutant in labsteps/mutants (each must be rejected by
every step its mutant names) and every variant there (a correct answer the
contract allows: every step must pass it), and prints a table and the line
  selftest: N/N mutants rejected, V/V variants passed, reference 8/8, starter 0/8
Exit 0 only if everything went as expected. Names limit the mutants and
variants. See docs/selftest.md.

flags:
`

// selftestFailed is a self-test whose table says what went wrong.
type selftestFailed struct{ summary string }

func (s selftestFailed) Error() string {
	return s.summary + ": not everything went as expected (see above)"
}

// runSelftest grades the reference, the starter and every mutant.
func runSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg starter.SelftestConfig
	var asJSON, verbose bool
	var module string
	fs := flag.NewFlagSet("lab selftest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&module, "module", "", "the reference module `dir` (default: the module holding the current directory)")
	fs.StringVar(&cfg.Work, "work", "", "parent `dir` of the copies and work dirs (default: the system temp dir)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the copies, executables and every step's work dir")
	cliflag.IntVar(fs, &cfg.Builds, "jobs", runtime.NumCPU(), "builds at once")
	cliflag.IntVar(fs, &cfg.Labs, "parallel", starter.DefaultLabs, "steps run at once: a mutant's run of the one step it names takes one, a run of all eight (the reference, a variant) takes eight")
	fs.BoolVar(&cfg.AllSteps, "all-steps", false, "run every step against each mutant, not only those it names, and list the other steps that reject it too")
	cliflag.IntVar(fs, &cfg.Repeat, "repeat", 1, "run the lab this many times per target; a target is as expected only if every run is")
	fs.DurationVar(&cfg.StepTimeout, "timeout", 0, "time limit of one step (default: derived from the calibration and the load, as `lab run` does; a loaded machine gets longer limits, not wrong answers)")
	fs.BoolVar(&asJSON, "json", false, "print the report as one JSON object instead of the table")
	fs.BoolVar(&verbose, "v", false, "also print a progress line as each target is built (one per target graded is always printed, to stderr)")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, selftestUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("selftest: %v. Try: lab selftest -h", err)}
	}
	if cfg.Builds < 1 || cfg.Labs < 1 || cfg.Repeat < 1 {
		return usageErr{"selftest: --jobs, --parallel and --repeat must be at least 1. Try: lab selftest --repeat 20"}
	}
	if cfg.Module, err = moduleRoot(module); err != nil {
		return usageErr{"selftest: " + err.Error()}
	}
	cfg.Only = pos
	// A line per target graded ("[i/n] graded NAME ok"), always: a selftest
	// takes minutes; -v adds a line per build.
	cfg.Progress = func(format string, a ...any) {
		if !verbose && strings.HasPrefix(format, "selftest: built") {
			return
		}
		fmt.Fprintf(stderr, format+"\n", a...)
	}
	rep, err := starter.Selftest(ctx, cfg)
	if err != nil {
		return fmt.Errorf("selftest: %w", err)
	}
	if asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return err
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if !rep.OK {
		return selftestFailed{rep.Summary}
	}
	return nil
}
