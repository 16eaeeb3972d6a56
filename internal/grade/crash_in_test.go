package grade_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"snacklab/internal/crash"
	"snacklab/internal/grade"
)

// TestGradeCrashIn: across a boundary, a report is scored, a run with no
// report is not graded (no points, its reason), and the runner's own error
// is the grader's, for the crash points and the power cut alike.
func TestGradeCrashIn(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("engine gone")
	for _, c := range []struct {
		name      string
		rep       bool
		notGraded string
		err       error
		score     float64
		reason    string
	}{
		{"a clean report", true, "", nil, 10, ""},
		{"no report", false, "wall-clock limit", nil, 0, "wall-clock limit"},
		{"the grader's failure", false, "", boom, 0, ""},
	} {
		crashRun := func(context.Context, string, int64, int) (*crash.Report, string, error) {
			if c.rep {
				return &crash.Report{OK: true}, "", nil
			}
			return nil, c.notGraded, c.err
		}
		cutRun := func(context.Context, string, int64) (*crash.PowerCutReport, string, error) {
			if c.rep {
				return &crash.PowerCutReport{OK: true}, "", nil
			}
			return nil, c.notGraded, c.err
		}
		a, errA := grade.GradeCrashIn(ctx, crashRun, "bin", 10, "alice")
		b, errB := grade.GradePowerCutIn(ctx, cutRun, "bin", 10, "alice")
		for _, r := range []struct {
			what string
			rec  grade.StepRecord
			err  error
		}{{"crash", a, errA}, {"power cut", b, errB}} {
			if !errors.Is(r.err, c.err) || r.rec.Score != c.score || !strings.Contains(r.rec.Reason, c.reason) {
				t.Errorf("%s, %s: got score %v, reason %q, err %v; want %v, %q, %v", c.name, r.what, r.rec.Score, r.rec.Reason, r.err, c.score, c.reason, c.err)
			}
		}
	}
}
