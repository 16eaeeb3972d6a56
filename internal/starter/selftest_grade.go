package starter

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"snacklab/internal/crash"
	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/result"
)

// gradeTarget grades one built target in dir: its lab runs, when it has
// steps to run, then the crash and power-cut checks its kind and the
// selected mutants call for, each adding its row to the target's Outcome.
func gradeTarget(ctx context.Context, cfg SelftestConfig, t *target, dir string, all []mutants.Mutant) {
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
}

// grade runs the lab against one built target cfg.Repeat times and judges
// the results by the target's kind.
func grade(ctx context.Context, cfg SelftestConfig, out *Outcome, bin, dir string, nums []int) {
	lab := labsteps.Config{Bin: bin, WorkRoot: filepath.Join(dir, "steps"), StepTimeout: cfg.StepTimeout, Keep: cfg.Keep}
	if out.Kind == KindMutant {
		// A mutant's step has done its part at its first failure on the
		// mutant's clause (rejectedOnClause): the rest of it is not run.
		lab.StopAt = func(c result.Check) bool { return sharesClause(c.Clause, out.Clauses) }
	}
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
		runs = append(runs, retryUnjudged(ctx, lab, steps, labsteps.RunSteps(ctx, lab, steps, nil)))
	}
	judge(out, runs)
}

// retryUnjudged runs again, alone and after a pause, each step of rs that
// was not judged where a retry may judge it (result.Retryable), up to
// selftestRetries times, as `lab grade --retries` does: a selftest beside
// other work (CI runs it alongside the slow tests) must not report the
// machine's load as a variant that failed or a mutant let through.
func retryUnjudged(ctx context.Context, lab labsteps.Config, steps []labsteps.Step, rs []result.Result) []result.Result {
	for attempt := 1; attempt <= selftestRetries; attempt++ {
		for i, r := range rs {
			if ctx.Err() != nil || !r.Retryable() {
				continue
			}
			select {
			case <-time.After(time.Duration(attempt) * retryPause):
			case <-ctx.Done():
				return rs
			}
			rs[i] = labsteps.RunSteps(ctx, lab, steps[i:i+1], nil)[0]
		}
	}
	return rs
}

// How often, and after what pause (times the attempt), a step not judged
// runs again.
const (
	selftestRetries = 2
	retryPause      = 3 * time.Second
)

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
		row := judgeStep(out, step, runs)
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

// judgeStep is the row of one named step: in how many runs it went as the
// target's kind wants (out's Kind and Clauses), with the detail of a run
// that did not.
func judgeStep(out *Outcome, step int, runs [][]result.Result) Row {
	n := len(runs)
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
	return row
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
		row.Detail = reportText(rep)
	}
	out.addRow(row)
}

// addRow adds a crash or power-cut row to out: out is as expected only if
// every row is.
func (out *Outcome) addRow(row Row) {
	out.Rows = append(out.Rows, row)
	out.OK = out.OK && row.OK
}

// reportText is the whole text of a crash or power-cut report: the detail
// of a row not as expected that names no violation.
func reportText(rep interface{ WriteText(io.Writer) error }) string {
	var b strings.Builder
	rep.WriteText(&b)
	return b.String()
}
