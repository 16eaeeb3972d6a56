package grade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"snacklab/labsteps"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// A submission's steps, each run cfg.Runs times, and how the runs of one
// step fold into its record and score.

// runAll runs steps cfg.Runs times, at most par at once (0: all); each
// run's work dirs go under logRoot (logRoot/run-K when there are several
// runs).
func (g *grader) runAll(ctx context.Context, name, bin, logRoot string, steps []labsteps.Step, par int) ([][]result.Result, [][]string) {
	results := make([][]result.Result, len(steps))
	notes := make([][]string, len(steps))
	for i := range steps {
		results[i] = make([]result.Result, g.cfg.Runs)
	}
	if par <= 0 {
		par = len(steps)
	}
	for run := range g.cfg.Runs {
		if b := g.cfg.Boundary; b != nil {
			rs, err := b.Run(ctx, bin, steps, g.cfg.StepTimeout, par)
			if err == nil && len(rs) != len(steps) {
				err = fmt.Errorf("isolated run reported %d steps, want %d", len(rs), len(steps))
			}
			for i, s := range steps {
				if err != nil {
					results[i][run] = result.Result{Step: s.Step, Problem: "grader: " + err.Error(), NotJudged: notJudged(ctx)}
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
				results[i][run] = result.Result{Step: s.Step, Problem: "grader: " + err.Error(), NotJudged: notJudged(ctx)}
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

// retryUnjudged runs again, up to cfg.Retries times, every step some part
// of which was not judged in some run (see unjudged): one step at a time
// (the machine was too loaded, or the grader erred), after a pause that grows with each
// attempt, each attempt said in the log and the step's notes. What was not
// judged counts for nothing, so a retry's runs replace the step's.
func (g *grader) retryUnjudged(ctx context.Context, name, bin, logRoot string, steps []labsteps.Step, results [][]result.Result, notes [][]string) {
	for attempt := 1; attempt <= g.cfg.Retries && ctx.Err() == nil; attempt++ {
		var idx []int
		var again []labsteps.Step
		var which []string
		for i, runs := range results {
			if unjudged(runs) {
				idx, again = append(idx, i), append(again, steps[i])
				which = append(which, strconv.Itoa(steps[i].Num))
			}
		}
		if len(again) == 0 {
			return
		}
		pause := time.Duration(attempt) * retryPause
		g.logf("  %s: step(s) %s not judged; retry %d of %d in %v, one step at a time\n", name, strings.Join(which, ", "), attempt, g.cfg.Retries, pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		rs, ns := g.runAll(ctx, name, bin, filepath.Join(logRoot, fmt.Sprintf("retry-%d", attempt)), again, 1)
		for j, i := range idx {
			results[i] = rs[j]
			notes[i] = append(notes[i], fmt.Sprintf("attempt %d: the step was not judged before (a limit the grader set ran out, or the grader erred), so it ran again, alone", attempt+1))
			notes[i] = append(notes[i], ns[j]...)
		}
	}
}

// retryPause is the pause before the first retry; the n-th waits n times it.
const retryPause = 3 * time.Second

// unjudged says some run of a step is result.Retryable.
func unjudged(runs []result.Result) bool {
	return slices.ContainsFunc(runs, result.Result.Retryable)
}

// notJudged is the verdict of a step the grader could not run: interrupted
// when ctx ended, else the grader's own error.
func notJudged(ctx context.Context) result.Verdict {
	if ctx.Err() != nil {
		return result.Interrupted
	}
	return result.Error
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
		if r.Verdict() == result.Fail {
			s.Wrong++
		}
		if firstFail == nil {
			firstFail = r
		}
		if r.Dir != "" {
			s.Kept = append(s.Kept, r.Dir)
		}
	}
	s.Flaky = s.Passes > 0 && s.Wrong > 0
	dirs := []string{rec.Bin, rec.Source}
	for _, r := range runs {
		dirs = append(dirs, r.LogDir, r.Dir)
	}
	var unjudged result.Verdict
	s.Score, s.Parts, unjudged = g.scoreParts(*s, runs, dirs)
	if s.Wrong == 0 {
		s.NotJudged = unjudged
	}
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
//
// unjudged is the first part's (or the unit's) reason it was not judged.
func (g *grader) scoreParts(s StepRecord, runs []result.Result, dirs []string) (total float64, parts []PartRecord, unjudged result.Verdict) {
	step := result.Step{Num: s.Num, Slug: s.Slug, Title: s.Title}
	if len(runs) > 0 {
		step = runs[0].Step
	}
	scored := report.ScoreRuns(step, runs, s.Points, g.cfg.Scheme)
	for _, p := range scored {
		total += p.Score
		if p.Status() == result.NotJudgedWord && unjudged == "" {
			unjudged = p.NotJudged
		}
		if p.ID == "" {
			continue // a step without parts is one test: the StepRecord itself
		}
		pr := PartRecord{ID: p.ID, Name: p.Name, Points: p.Points, Score: p.Score, Passes: p.Passes, Runs: p.Runs,
			Wrong: p.Wrong, NotJudged: p.NotJudged, Visibility: g.cfg.Scheme.VisibilityOf(s.Num, p.ID)}
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
		pr.Reason = g.student(result.OneLine(strings.Join(causes, "; "), 600), dirs...)
		out := g.student(p.Explain(), dirs...)
		if p.Status() != "passed" {
			out += fmt.Sprintf("Re-run on your machine: %s\n", StudentReplay(s.Num))
		}
		pr.Output = out + "Why: " + step.Why + "\n"
		parts = append(parts, pr)
	}
	return report.Round(total), parts, unjudged
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
	return result.OneLine(strings.Join(causes, "; "), 600)
}
