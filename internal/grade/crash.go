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
)

// Crash verification (`lab crash`) as a graded item. It is off by default:
// it needs ptrace, which a container of --isolate docker does not grant
// (docs/crash.md), and it costs about a minute per submission. A teacher
// turns it on with points for it: --points 1=10,…,crashpoints=40.
const (
	// CrashName is the item's name in --points. ("crash" is step 8's.)
	CrashName = "crashpoints"
	// CrashItem is its key in Points, after the eight steps.
	CrashItem = 9
	// crashKills is the soak of a graded run: a short one.
	crashKills = 20
)

// CrashPoints is what the crash item is worth; 0 when it is not graded.
func (p Points) CrashPoints() float64 { return p[CrashItem] }

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
	h := fnv.New64a()
	h.Write([]byte(name))
	seed := int64(h.Sum64() % 1_000_000)
	rec := StepRecord{Num: CrashItem, Slug: CrashName, Title: crash.Step.Title, Points: points, Runs: 1}
	t0 := time.Now()
	if err := os.MkdirAll(work, 0o755); err != nil {
		rec.Reason = err.Error()
		return rec
	}
	rep, err := crash.Run(ctx, crash.Config{Bin: bin, Work: work, Seed: seed, Kills: crashKills})
	rec.Took = time.Since(t0).Seconds()
	rec.Replay = fmt.Sprintf("lab crash --bin BIN --seed %d --kills %d", seed, crashKills)
	switch {
	case errors.Is(err, crash.ErrNoTracing):
		rec.Reason = "not graded: this grader cannot trace processes (ptrace): " + err.Error()
		rec.Output = rec.Reason
		return rec
	case err != nil:
		rec.Reason = err.Error()
		rec.Output = "lab crash could not run: " + err.Error()
		return rec
	}
	var b strings.Builder
	rep.WriteText(&b)
	rec.Output = b.String()
	if rep.OK {
		rec.Passes, rec.Score = 1, points
		return rec
	}
	if len(rep.Violations) > 0 {
		v := rep.Violations[0]
		rec.Reason = fmt.Sprintf("%s killed at crash point %d (%s): %s: %s", v.Program, v.N, v.Call, v.Invariant, v.Detail)
	} else {
		rec.Reason = "lab crash failed"
	}
	return rec
}
