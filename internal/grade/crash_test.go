package grade_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"snacklab/internal/crash"
	"snacklab/internal/grade"
	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

func TestParsePointsCrash(t *testing.T) {
	p, err := grade.ParsePoints("1=10,crashpoints=40")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.CrashPoints(), 40.0; got != want {
		t.Errorf("CrashPoints() = %v, want %v", got, want)
	}
	if got, want := p.Max(), 50.0; got != want {
		t.Errorf("Max() = %v, want %v", got, want)
	}
	if p, _ := grade.ParsePoints("1=10"); p.CrashPoints() != 0 {
		t.Errorf("crash verification is graded without being asked for")
	}
	p, err = grade.ParsePoints("1=10,crashpoints=40,powercut=20")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.PowerCutPoints(), 20.0; got != want {
		t.Errorf("PowerCutPoints() = %v, want %v", got, want)
	}
	if got, want := p.Max(), 70.0; got != want {
		t.Errorf("Max() with the power cut = %v, want %v", got, want)
	}
	if _, err := grade.ParsePoints("9=10"); err == nil {
		t.Errorf("ParsePoints(9=10) accepted a step 9")
	}
}

// Across a boundary the crash and power-cut items are graded from
// Boundary.Crash's and Boundary.PowerCut's reports:
// all the points for a report without violations, none for one with, and
// none with the reason "not graded" when the boundary has no report (a
// container killed at its wall-clock limit). The seed is the submission's
// own, so a regrade replays the plan.
func TestCrashAcrossTheBoundary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var subs []string
	for _, name := range []string{"a-ok", "b-violates", "c-walled"} {
		subs = append(subs, binDir(t, root, name, map[string]string{"queuectl": "exit 0", "sender": "exit 0", "receiver": "exit 0"}))
	}
	seeds := make(chan int64, len(subs))
	b := &grade.Boundary{Mode: "test boundary",
		Run: func(_ context.Context, _ string, steps []labsteps.Step, _ time.Duration, _ int) ([]result.Result, error) {
			res := make([]result.Result, len(steps))
			for i, s := range steps {
				res[i] = result.Result{Step: s.Step, Pass: true}
			}
			return res, nil
		},
		Crash: func(_ context.Context, bin string, seed int64, kills int) (*crash.Report, string, error) {
			seeds <- seed
			switch filepath.Base(bin) {
			case "a-ok":
				return &crash.Report{OK: true, Bin: "/sub", Seed: seed}, "", nil
			case "b-violates":
				v := crash.Violation{Program: "enqueue", N: 3, Call: "fsync q.db", Invariant: crash.InvDurable, Detail: "answered before the sync"}
				return &crash.Report{Bin: "/sub", Seed: seed, Violations: []crash.Violation{v}}, "", nil
			}
			return nil, "wall-clock limit: lab crash was still running after 15m0s and was killed from outside; not graded", nil
		},
		PowerCut: func(_ context.Context, bin string, seed int64) (*crash.PowerCutReport, string, error) {
			switch filepath.Base(bin) {
			case "a-ok":
				return &crash.PowerCutReport{OK: true, Bin: "/sub", Seed: seed}, "", nil
			case "b-violates":
				v := crash.CutViolation{Violation: crash.Violation{Program: "enqueue", Invariant: crash.InvAnswered, Detail: "o-1 lost"}, Barrier: 7, State: 2, Label: "journal unlink dropped"}
				return &crash.PowerCutReport{Bin: "/sub", Seed: seed, Violations: []crash.CutViolation{v}}, "", nil
			}
			return nil, "the lab in the container did not start as an isolated grader (exit 2); not graded", nil
		},
	}
	cfg := config(t, filepath.Join(root, "out"))
	cfg.Boundary = b
	cfg.Points = grade.Points{1: 10, grade.CrashItem(): 40, grade.PowerCutItem(): 20}
	rep, err := grade.Grade(context.Background(), cfg, subs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		score           float64
		crash, powerCut string // reasons
	}{
		"a-ok":       {70, "", ""},
		"b-violates": {10, "enqueue killed at crash point 3 (fsync q.db): durable-before-reported", "enqueue: power cut at barrier 7, state 2"},
		"c-walled":   {10, "not graded: wall-clock limit", "not graded: the lab in the container did not start"},
	}
	for _, r := range rep.Graded {
		w := want[r.Name]
		n := len(r.Steps)
		for i, it := range []struct {
			slug, reason string
		}{{grade.CrashName, w.crash}, {grade.PowerCutName, w.powerCut}} {
			st := r.Steps[n-2+i]
			if st.Slug != it.slug || !strings.HasPrefix(st.Reason, it.reason) || (it.reason == "") != (st.Reason == "") {
				t.Errorf("%s: item %s %q; want %s with a reason starting %q", r.Name, st.Slug, st.Reason, it.slug, it.reason)
			}
		}
		if r.Score != w.score || r.Max != 70 {
			t.Errorf("%s: score %v of %v, want %v of 70", r.Name, r.Score, r.Max, w.score)
		}
	}
	close(seeds)
	for s := range seeds {
		if s == 0 {
			t.Error("a crash run with seed 0 (lab crash draws one from the clock): want the submission's own")
		}
	}
}
