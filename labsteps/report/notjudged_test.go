package report_test

import (
	"bytes"
	"strings"
	"testing"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// TestNotJudgedIsNeitherPassedNorFailed: a part whose only failures are
// waits running out, or that an interrupt or the lab's own error stopped,
// is "not judged" (scores nothing, counts for nothing), a wrong answer in
// any run makes it failed, and results.json then carries no score at all.
func TestNotJudgedIsNeitherPassedNorFailed(t *testing.T) {
	step := result.Step{Num: 6, Slug: "run-once", Title: "Run-once"}
	run := func(notJudged result.Verdict, checks ...result.Check) result.Result {
		r := result.Result{Step: step, Parts: []string{"a: one", "b: two"}, Checks: checks, NotJudged: notJudged}
		r.Pass = r.Failed() == nil && notJudged == ""
		return r
	}
	ok := func(part string) result.Check { return result.Check{What: "fine", OK: true, Part: part} }
	wrong := func(part string) result.Check { return result.Check{What: "wrong", Part: part} }
	waited := func(part string) result.Check { return result.Check{What: "waited", Part: part, TimedOut: true} }
	for _, tc := range []struct {
		name   string
		runs   []result.Result
		status [2]string
		score  float64
	}{
		{"a wait ran out in b", []result.Result{run("", ok("a: one"), waited("b: two"))}, [2]string{"passed", "not judged"}, 5},
		{"a wrong answer in b", []result.Result{run("", ok("a: one"), wrong("b: two"))}, [2]string{"passed", "failed"}, 5},
		{"waited, then wrong in another run", []result.Result{run("", ok("a: one"), waited("b: two")), run("", ok("a: one"), wrong("b: two"))}, [2]string{"passed", "failed"}, 5},
		{"passed, then waited", []result.Result{run("", ok("a: one"), ok("b: two")), run("", ok("a: one"), waited("b: two"))}, [2]string{"passed", "not judged"}, 5},
		{"passed, then wrong: flaky", []result.Result{run("", ok("a: one"), ok("b: two")), run("", ok("a: one"), wrong("b: two"))}, [2]string{"passed", "flaky"}, 5},
		{"interrupted", []result.Result{run(result.Interrupted, ok("a: one"))}, [2]string{"not judged", "not judged"}, 0},
		{"the lab erred", []result.Result{run(result.Error)}, [2]string{"not judged", "not judged"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := report.ScoreRuns(step, tc.runs, 10, report.Scheme{})
			score := 0.0
			for i, p := range parts {
				if got := p.Status(); got != tc.status[i] {
					t.Errorf("part %s: got %q, want %q", p.ID, got, tc.status[i])
				}
				score += p.Score
			}
			if score != tc.score {
				t.Errorf("score: got %g, want %g", score, tc.score)
			}
		})
	}

	g := report.GradescopeOf([]result.Result{run("", ok("a: one"), waited("b: two"))}, 0, report.Scheme{}, nil)
	if !g.NotGraded {
		t.Fatalf("results.json of a run with a part not judged: NotGraded false, want true")
	}
	var b bytes.Buffer
	if err := report.EncodeGradescope(&b, g); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"score"`) {
		t.Errorf("results.json not graded: got a score in it, want none:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "not judged") || !strings.Contains(b.String(), `"max_score"`) {
		t.Errorf("results.json not graded: want its output to say \"not judged\" and its tests their max_score:\n%s", b.String())
	}
}
