package grade

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/labsteps"
)

// Crash verification (`lab crash`) as a graded item. It is off by default:
// it costs a minute or more per submission. Isolated, it runs in a
// container of its own with the steps' separation (Boundary.Crash,
// Boundary.PowerCut; docs/isolation.md). A teacher
// turns it on with points for it: --points 1=10,…,crashpoints=40. The
// power cut (`lab crash --power-cut`, small budget) is graded the same way:
// --points …,powercut=20.
const (
	// CrashName is the item's name in --points. ("crash" is step 8's.)
	CrashName = "crashpoints"
	// PowerCutName is the power-cut item's name in --points.
	PowerCutName = "powercut"
	// crashKills is the soak of a graded run: a short one.
	crashKills = 20
)

// CrashItem is the crash item's key in Points: after the last step, so a
// step added to the lab never shares a key with it.
func CrashItem() int { return len(labsteps.Steps()) + 1 }

// PowerCutItem is the power-cut item's key in Points, after CrashItem.
func PowerCutItem() int { return len(labsteps.Steps()) + 2 }

// CrashPoints is what the crash item is worth; 0 when it is not graded.
func (p Points) CrashPoints() float64 { return p[CrashItem()] }

// PowerCutPoints is what the power-cut item is worth; 0 when it is not graded.
func (p Points) PowerCutPoints() float64 { return p[PowerCutItem()] }

// seedOf is a submission's seed: from its name, so a regrade replays the
// same plan.
func seedOf(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64() % 1_000_000)
}

// GradeCrash runs the crash-point enumeration and a short soak against a
// submission's executables in bin, under work, and scores it: all the
// points when no invariant broke, none otherwise. The soak's seed comes
// from the submission's name, so a regrade replays the same plan. The
// caller adds the record to the submission's steps when CrashPoints > 0:
//
//	if pts := g.cfg.Points.CrashPoints(); pts > 0 && rec.Problem == "" {
//		rec.Steps = append(rec.Steps, GradeCrash(ctx, rec.Bin, dir, pts, sub.Name))
//		rec.Max += pts
//	}
//
// before the loop that sums the scores (internal/grade/grade.go, gradeOne).
func GradeCrash(ctx context.Context, bin, work string, points float64, name string) StepRecord {
	seed := seedOf(name)
	return gradeHere(crashRecord(points, seed), work, "lab crash", func() (*crash.Report, error) {
		return crash.Run(ctx, crash.Config{Bin: bin, Work: work, Seed: seed, Kills: crashKills})
	}, scoreCrash)
}

// gradeHere runs one crash item on this machine under work into rec,
// timed: a grader that cannot trace is "not graded", a run that could not
// happen is the reason, a report is scored by score.
func gradeHere[R any](rec StepRecord, work, what string, run func() (*R, error), score func(*StepRecord, *R)) StepRecord {
	t0 := time.Now()
	if err := os.MkdirAll(work, 0o755); err != nil {
		rec.Reason = err.Error()
		return rec
	}
	rep, err := run()
	rec.Took = time.Since(t0).Seconds()
	switch {
	case errors.Is(err, crash.ErrNoTracing):
		rec.Reason = "not graded: this grader cannot trace processes (ptrace): " + err.Error()
		rec.Output = rec.Reason
		return rec
	case err != nil:
		rec.Reason = err.Error()
		rec.Output = what + " could not run: " + err.Error()
		return rec
	}
	score(&rec, rep)
	return rec
}

// CrashRunner runs lab crash (every program, a soak of kills with seed)
// against the executables in bin somewhere else: a grading container
// (isolate.Engine.Crash), where the lab is the judge and the programs the
// judged. It returns the lab's report, or why there is none to grade
// (notGraded: the wall-clock limit, a report the lab did not stand by); err
// is the grader's own failure.
type CrashRunner func(ctx context.Context, bin string, seed int64, kills int) (rep *crash.Report, notGraded string, err error)

// GradeCrashIn is GradeCrash across a boundary: run runs lab crash where
// the submission cannot reach the grader, and the report is scored the same
// way. A run with no report is not graded: no points, and the reason; an
// error is the grader's own failure.
func GradeCrashIn(ctx context.Context, run CrashRunner, bin string, points float64, name string) (StepRecord, error) {
	seed := seedOf(name)
	return gradeIn(crashRecord(points, seed), "lab crash", func() (*crash.Report, string, error) {
		return run(ctx, bin, seed, crashKills)
	}, scoreCrash)
}

// gradeIn runs one crash item across the boundary into rec, timed: an error
// is the grader's own failure, a run with no report is not graded (no
// points, and the reason), a report is scored by score.
func gradeIn[R any](rec StepRecord, what string, run func() (*R, string, error), score func(*StepRecord, *R)) (StepRecord, error) {
	t0 := time.Now()
	rep, notGraded, err := run()
	rec.Took = time.Since(t0).Seconds()
	if err != nil {
		return rec, fmt.Errorf("%s in isolation: %w", what, err)
	}
	if rep == nil {
		notGradedRecord(&rec, notGraded)
		return rec, nil
	}
	score(&rec, rep)
	return rec, nil
}

// crashRecord is the crash item's record before the run.
func crashRecord(points float64, seed int64) StepRecord {
	return StepRecord{Num: CrashItem(), Slug: CrashName, Title: crash.Step.Title, Points: points, Runs: 1,
		Replay: fmt.Sprintf("lab crash --bin BIN --seed %d --kills %d", seed, crashKills)}
}

// scoreCrash scores a report: all the points when no invariant broke,
// none otherwise, with the first violation as the reason.
func scoreCrash(rec *StepRecord, rep *crash.Report) {
	var b strings.Builder
	rep.WriteText(&b)
	rec.Output = b.String()
	if rep.OK {
		rec.Passes, rec.Score = 1, rec.Points
		return
	}
	if len(rep.Violations) > 0 {
		v := rep.Violations[0]
		rec.Reason = fmt.Sprintf("%s killed at crash point %d (%s): %s: %s", v.Program, v.N, v.Call, v.Invariant, v.Detail)
	} else {
		rec.Reason = "lab crash failed"
	}
}

// GradePowerCut runs `lab crash --power-cut` with the small budget (the one
// CI runs on the reference) against a submission's executables in bin,
// under work, and scores it as GradeCrash does: all the points when no
// state broke an invariant, none otherwise. The seed comes from the
// submission's name.
func GradePowerCut(ctx context.Context, bin, work string, points float64, name string) StepRecord {
	seed := seedOf(name)
	return gradeHere(powerCutRecord(points, seed), work, "lab crash --power-cut", func() (*crash.PowerCutReport, error) {
		return crash.PowerCut(ctx, crash.PowerCutConfig{Bin: bin, Work: work, Seed: seed, Budget: powercut.Small})
	}, scorePowerCut)
}

// PowerCutRunner is CrashRunner for the power cut: lab crash --power-cut,
// small budget, seeded with seed, across the boundary
// (isolate.Engine.PowerCutRunner).
type PowerCutRunner func(ctx context.Context, bin string, seed int64) (rep *crash.PowerCutReport, notGraded string, err error)

// GradePowerCutIn is GradePowerCut across a boundary, as GradeCrashIn is
// GradeCrash's.
func GradePowerCutIn(ctx context.Context, run PowerCutRunner, bin string, points float64, name string) (StepRecord, error) {
	seed := seedOf(name)
	return gradeIn(powerCutRecord(points, seed), "lab crash --power-cut", func() (*crash.PowerCutReport, string, error) {
		return run(ctx, bin, seed)
	}, scorePowerCut)
}

// powerCutRecord is the power-cut item's record before the run.
func powerCutRecord(points float64, seed int64) StepRecord {
	return StepRecord{Num: PowerCutItem(), Slug: PowerCutName, Title: "power cut: every on-disk state of the small budget", Points: points, Runs: 1,
		Replay: fmt.Sprintf("lab crash --bin BIN --power-cut --seed %d", seed)}
}

// scorePowerCut scores a power-cut report as scoreCrash does.
func scorePowerCut(rec *StepRecord, rep *crash.PowerCutReport) {
	var b strings.Builder
	rep.WriteText(&b)
	rec.Output = b.String()
	if rep.OK {
		rec.Passes, rec.Score = 1, rec.Points
		return
	}
	if len(rep.Violations) > 0 {
		v := rep.Violations[0]
		rec.Reason = fmt.Sprintf("%s: power cut at barrier %d, state %d (%s): %s: %s", v.Program, v.Barrier, v.State, v.Label, v.Invariant, v.Detail)
	} else {
		rec.Reason = "lab crash --power-cut failed"
	}
}

// notGradedRecord marks an item the boundary returned no report for: no
// run counted, no points, the reason.
func notGradedRecord(rec *StepRecord, why string) {
	rec.Runs = 0
	rec.Reason = "not graded: " + why
	rec.Output = "Not graded: " + why
}
