package grade_test

import (
	"bytes"
	"strings"
	"testing"

	"snacklab/internal/grade"
	"snacklab/internal/junittest"
)

// lab grade's junit.xml passes the schema Jenkins' xUnit plugin validates
// against, for every kind of step (passed, failed, flaky, not run) and for a
// submission that was not graded; each step's points stay in the file as
// suite properties.
func TestJUnitValidatesAgainstSchema(t *testing.T) {
	steps := []grade.StepRecord{
		{Num: 1, Slug: "retry", Points: 25, Score: 25, Passes: 2, Runs: 2, Output: "ok"},
		{Num: 2, Slug: "durable", Points: 25, Passes: 0, Runs: 2, Reason: "lost a job", Output: "✗ lost"},
		{Num: 3, Slug: "claim", Points: 25, Passes: 1, Runs: 2, Flaky: true, Reason: "two winners", Output: "✗ two", Parts: []grade.PartRecord{
			{ID: "a", Name: "a: lease", Points: 12.5, Score: 12.5, Passes: 2, Runs: 2, Output: "ok"},
			{ID: "b", Name: "b: spent", Points: 12.5, Passes: 1, Runs: 2, Reason: "[b] two winners", Output: "✗ [b] two winners"}}},
		{Num: 4, Slug: "finish", Points: 25},
	}
	for _, tc := range []struct {
		name string
		rec  grade.Record
	}{
		{"graded", grade.Record{Name: "ann", Source: "/c/ann", Kind: grade.KindModule, Runs: 2, Score: 25, Max: 100, Took: 3.25, Steps: steps}},
		{"build failed", grade.Record{Name: "bob", Source: "/c/bob", Kind: grade.KindModule, Problem: "build failed", BuildOut: "x.go:1: <-chan", Max: 100, Steps: steps[3:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := grade.WriteJUnit(&b, tc.rec); err != nil {
				t.Fatal(err)
			}
			junittest.Validate(t, tc.name+" junit.xml", b.Bytes())
			if tc.name == "graded" && !strings.Contains(b.String(), `<property name="step3_claim_b.score" value="0">`) {
				t.Errorf("junit.xml: expected a testcase per part of step 3 with its score, observed:\n%s", b.String())
			}
			if !strings.Contains(b.String(), `<property name="step4_finish.points" value="25">`) {
				t.Errorf("junit.xml: expected step 4's points as the suite property step4_finish.points, observed:\n%s", b.String())
			}
		})
	}
}
