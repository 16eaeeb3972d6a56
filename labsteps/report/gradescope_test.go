package report_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// Gradescope's documented fields of results.json (its autograder
// specification): nothing else at the top level or in a test, statuses
// passed and failed, visibility one of its four values.
var (
	gsTop  = []string{"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
	gsTest = []string{"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags", "visibility", "extra_data"}
)

// A step of three parts, one failed, with the failed part hidden and the
// whole after the due date: one test per part, points split, every field
// one Gradescope documents, and an unknown visibility refused.
func TestGradescopeHiddenPartsAsDocumented(t *testing.T) {
	r := result.Result{Step: result.Step{Num: 6, Slug: "run-once", Title: "Run-once", Why: "w"},
		Parts: []string{"a: one", "b: two", "c: three"},
		Checks: []result.Check{{What: "x", OK: true, Part: "a: one"},
			{What: "y", Expected: "1", Observed: "2", Why: "z", Part: "b: two", Clause: []string{"§4.ack"}},
			{What: "w", OK: true, Part: "c: three"}}}
	sc := report.Scheme{Visibility: map[string]string{"": report.AfterDueDate, "6.b": report.Hidden}}
	var b bytes.Buffer
	if err := report.EncodeGradescope(&b, report.GradescopeOf([]result.Result{r}, time.Second, sc, map[int]float64{6: 30})); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for k := range doc {
		if !slices.Contains(gsTop, k) {
			t.Errorf("results.json has %q, not a field Gradescope documents", k)
		}
	}
	if doc["visibility"] != report.AfterDueDate || doc["score"] != 20.0 {
		t.Errorf("visibility %v, score %v; want after_due_date, 20", doc["visibility"], doc["score"])
	}
	tests := doc["tests"].([]any)
	want := []string{"6.a passed 10 after_due_date", "6.b failed 0 hidden", "6.c passed 10 after_due_date"}
	for i, x := range tests {
		tc := x.(map[string]any)
		for k := range tc {
			if !slices.Contains(gsTest, k) {
				t.Errorf("test %d has %q, not a field Gradescope documents", i, k)
			}
		}
		got := strings.Join([]string{tc["number"].(string), tc["status"].(string), strings.TrimSuffix(jsonNum(tc["score"]), ".0"), tc["visibility"].(string)}, " ")
		if i >= len(want) || got != want[i] {
			t.Errorf("test %d = %s, want %v", i, got, want)
		}
		if tc["max_score"] != 10.0 || tc["output_format"] != "text" {
			t.Errorf("test %d: max_score %v, output_format %v; want 10, text", i, tc["max_score"], tc["output_format"])
		}
	}
	if out := tests[1].(map[string]any)["output"].(string); !strings.Contains(out, "✗ [b] y: expected 1, observed 2") || !strings.Contains(out, "clause:   §4.ack") {
		t.Errorf("the failed part's output lacks its failure:\n%s", out)
	}
	bad := report.Gradescope{Tests: []report.GradescopeTest{{Name: "x", Visibility: "secret"}}}
	if err := report.EncodeGradescope(&bytes.Buffer{}, bad); err == nil {
		t.Error("EncodeGradescope accepted visibility \"secret\"")
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
