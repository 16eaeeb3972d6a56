package grade_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// TestGradeCrashHereSaysWhyItDidNotRun: on this machine, a work dir that
// cannot be made and executables that are not there score nothing, with
// the reason, for the crash points and the power cut alike.
func TestGradeCrashHereSaysWhyItDidNotRun(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-bin")
	for _, c := range []struct {
		what, bin, work, want string
	}{
		{"work under a file", missing, filepath.Join(file, "work"), "not a directory"},
		{"no executables", missing, t.TempDir(), "no-bin/queuectl: no such file or directory"},
	} {
		a := grade.GradeCrash(ctx, c.bin, c.work, 10, "alice")
		b := grade.GradePowerCut(ctx, c.bin, c.work, 10, "alice")
		for _, r := range []grade.StepRecord{a, b} {
			if r.Score != 0 || r.Reason == "" || !strings.Contains(r.Reason+" "+r.Output, c.want) {
				t.Errorf("%s: %s: got score %v, reason %q, output %q; want 0 and %q", c.what, r.Slug, r.Score, r.Reason, r.Output, c.want)
			}
		}
	}
}
