package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// Grading one submission: build it (a module), run its steps and extra
// items, score them, and write its reports into its own directory.

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

// gradeOne grades one submission. What is wrong with the submission is in
// its Record; the error is the grader's own failure, or ctx's end.
func (g *grader) gradeOne(ctx context.Context, sub Submission) (Record, error) {
	t0 := time.Now()
	dir, err := g.subDir(sub.Name)
	if err != nil {
		return Record{}, err
	}
	abs, _ := filepath.Abs(sub.Path)
	rec := g.newRecord(sub, abs)
	var results [][]result.Result // [step][run]
	var notes [][]string
	switch sub.Kind {
	case KindInvalid:
		// The path is the grader's: the teacher's reports show it (Source),
		// the learner's results.json does not.
		rec.Problem = fmt.Sprintf("the submission %v", sub.Err)
	case KindModule, KindBin:
		if results, notes, err = g.runSteps(ctx, sub, abs, dir, &rec); err != nil {
			return Record{}, err
		}
	}
	if results, notes, err = g.runItems(ctx, &rec, dir, results, notes); err != nil {
		return Record{}, err
	}
	g.score(&rec, results, notes)
	rec.Took = seconds(time.Since(t0))
	// Tidy: an empty logs dir, and the built executables when nothing needs replaying.
	os.Remove(filepath.Join(dir, "logs"))
	if sub.Kind == KindModule && rec.Problem == "" && rec.Passed() == len(rec.Steps) {
		os.RemoveAll(rec.Bin)
		rec.Bin = ""
	}
	rec = cleanRecord(rec)
	return rec, g.writeRecord(dir, sub.Name, rec, results, t0)
}

// newRecord is a submission's record before grading: every graded step
// "Not run." and the points it could score.
func (g *grader) newRecord(sub Submission, abs string) Record {
	rec := Record{Name: sub.Name, Source: abs, Kind: sub.Kind, Runs: g.cfg.Runs, Mode: g.mode}
	for _, s := range g.cfg.Points.Steps() {
		rec.Steps = append(rec.Steps, StepRecord{Num: s.Num, Slug: s.Slug, Title: s.Title, Points: g.cfg.Points[s.Num],
			Output: "Not run."})
		rec.Max += g.cfg.Points[s.Num]
	}
	return rec
}

// runSteps builds a module submission (from abs into dir/bin), checks the
// executables, and runs the graded steps on them: results[step][run] and
// the grader's notes on each step. A submission that cannot run has
// rec.Problem set and no results; err is the grader's own failure.
func (g *grader) runSteps(ctx context.Context, sub Submission, abs, dir string, rec *Record) ([][]result.Result, [][]string, error) {
	bin := abs
	if sub.Kind == KindModule {
		g.logf("  %s: building (limit %v)…\n", sub.Name, g.buildLimit())
		bin = filepath.Join(dir, "bin")
		if built, err := g.buildInto(ctx, abs, bin, dir, rec); err != nil || !built {
			return nil, nil, err
		}
	}
	rec.Bin = bin
	if g.cfg.Boundary == nil {
		// Isolated runs check the programs as they stage them.
		if err := labsteps.CheckBin(bin); err != nil {
			rec.Problem = g.student(err.Error(), bin)
			return nil, nil, nil
		}
	}
	steps := g.cfg.Points.Steps()
	g.logf("  %s: running %d step(s), %d run(s) each…\n", sub.Name, len(steps), g.cfg.Runs)
	results, notes := g.runAll(ctx, sub.Name, bin, filepath.Join(dir, "logs"), steps, g.cfg.Parallel)
	g.retryUnjudged(ctx, sub.Name, bin, filepath.Join(dir, "logs"), steps, results, notes)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return results, notes, nil
}

// buildInto builds the module in src into bin. A failed build is the
// submission's problem, not an error: rec.Problem and rec.BuildOut say why,
// dir/build.log holds the compiler's output, and no bin is left (built is
// false).
func (g *grader) buildInto(ctx context.Context, src, bin, dir string, rec *Record) (built bool, err error) {
	out, failure, err := g.buildModule(ctx, src, bin)
	if errors.Is(err, ErrBuildLimit) && ctx.Err() == nil {
		rec.NotGraded = fmt.Sprintf("Not judged: %v (the grader's limit, on a machine it found loaded or a cold build cache; not the submission's fault). TIMEOUT is a limit the grader set running out.", err)
		rec.BuildOut = out
		os.RemoveAll(bin)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if failure != "" {
		rec.Problem = failure
		rec.BuildOut = out
		report.WriteFile(filepath.Join(dir, "build.log"), func(w io.Writer) error {
			_, err := io.WriteString(w, Clean(out)+"\n")
			return err
		})
		os.RemoveAll(bin)
		return false, nil
	}
	return true, nil
}

// runItems adds the extra items that have points to rec: crash
// verification and the power cut, run on this machine unisolated, across
// the boundary when it can run them (Boundary.Crash, Boundary.PowerCut),
// and only when the submission's executables are there. results and notes,
// when there are any, get an empty entry per item, so they stay aligned
// with rec.Steps.
func (g *grader) runItems(ctx context.Context, rec *Record, dir string, results [][]result.Result, notes [][]string) ([][]result.Result, [][]string, error) {
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
			if r, err = g.runItem(ctx, item.num, item.run, rec.Bin, filepath.Join(dir, item.slug), item.pts, rec.Name, r); err != nil {
				return nil, nil, err
			}
		}
		rec.Steps = append(rec.Steps, r)
		rec.Max += item.pts
		if results != nil {
			results = append(results, nil)
			notes = append(notes, nil)
		}
	}
	return results, notes, nil
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

// score folds each step's runs into its record (results[i] and notes[i]
// are rec.Steps[i]'s) and adds up rec.Score; with a problem, no step ran
// and each says why.
func (g *grader) score(rec *Record, results [][]result.Result, notes [][]string) {
	for i := range rec.Steps {
		if results != nil && results[i] != nil {
			g.fold(&rec.Steps[i], *rec, results[i], notes[i])
		}
		rec.Score = report.Round(rec.Score + rec.Steps[i].Score)
		if rec.Problem != "" {
			rec.Steps[i].Output = "Not run: " + rec.Problem
		}
	}
	if rec.NotGraded == "" {
		rec.NotGraded = notGraded(*rec)
	}
}

// notGraded says why rec is not graded: the parts (or steps) the lab could
// not judge, each with its verdict; "" when every part was judged.
func notGraded(rec Record) string {
	var which []string
	for _, st := range rec.Steps {
		if len(st.Parts) == 0 {
			if st.Status() == result.NotJudgedWord {
				which = append(which, fmt.Sprintf("step %d (%s)", st.Num, st.NotJudged))
			}
			continue
		}
		for _, p := range st.Parts {
			if p.Status() == result.NotJudgedWord {
				which = append(which, fmt.Sprintf("%d.%s (%s)", st.Num, p.ID, p.NotJudged))
			}
		}
	}
	if len(which) == 0 {
		return ""
	}
	return fmt.Sprintf("Not judged: %s. TIMEOUT is a limit the grader set running out, INTERRUPTED a grading stopped before it ended, ERROR the grader's own failure.",
		strings.Join(which, ", "))
}

// writeRecord writes the submission's results.json and junit.xml into dir
// from rec (already cleaned), and report.html when its steps ran.
func (g *grader) writeRecord(dir, name string, rec Record, results [][]result.Result, t0 time.Time) error {
	err := errors.Join(
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
			// A short title, how it was graded in the footer, and no
			// grader path anywhere (the student reads this page).
			return report.WriteHTML(w, report.HTMLReport{Title: "snacklab grade: " + name, Mode: "graded " + g.mode, When: time.Now(),
				Took: time.Since(t0), Results: reps, Points: g.cfg.Points, Scheme: g.cfg.Scheme})
		})
	}
	return err
}
