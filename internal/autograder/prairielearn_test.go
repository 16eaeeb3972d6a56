package autograder_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/autograder"
	"snacklab/labsteps/report"
)

// gradescopeJSON is results.json as the lab writes it.
func gradescopeJSON(t *testing.T, g report.Gradescope) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := report.EncodeGradescope(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestToPrairieLearn(t *testing.T) {
	tests2 := []report.GradescopeTest{
		{Name: "Step 1a: backoff", Score: 5, MaxScore: 5, Status: "passed", Output: "PASSED"},
		{Name: "Step 2: enqueue", Score: 0, MaxScore: 15, Status: "failed", Output: "FAILED: expected 1"},
	}
	tests := []struct {
		name         string
		in           []byte
		wantGradable bool
		wantScore    float64 // when gradable
		wantMessage  string  // a substring of message
		wantTests    int
	}{
		{"graded", gradescopeJSON(t, report.Gradescope{Score: 5, Output: "alice: 5 of 20 points.\nmore", Tests: tests2}), true, 0.25, "alice: 5 of 20 points.", 2},
		{"a build failure is a grade", gradescopeJSON(t, report.Gradescope{Score: 0, Output: "alice: 0 of 20 points. The build failed", Tests: tests2[1:]}), true, 0, "The build failed", 1},
		{"not graded: no score", gradescopeJSON(t, report.Gradescope{NotGraded: true, Output: "alice: NOT GRADED. step 6 timed out", Tests: tests2}), false, 0, "NOT GRADED", 0},
		{"not graded: extra_data says why", []byte(`{"score": 0, "output": "x", "tests": [], "extra_data": {"not_graded": "the wall clock ran out"}}`), false, 0, "the wall clock ran out", 0},
		{"the grader failed", gradescopeJSON(t, autograder.NotGradedResults()), false, 0, "NOT GRADED", 0},
		{"a score above the tests' maximum is 1", []byte(`{"score": 30, "tests": [{"name": "a", "score": 30, "max_score": 20}]}`), true, 1, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := autograder.ToPrairieLearn(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Gradable != tt.wantGradable {
				t.Errorf("gradable: got %v, want %v", got.Gradable, tt.wantGradable)
			}
			switch {
			case !tt.wantGradable && got.Score != nil:
				t.Errorf("score: got %v, want none (not graded is never 0)", *got.Score)
			case tt.wantGradable && (got.Score == nil || *got.Score != tt.wantScore):
				t.Errorf("score: got %v, want %v", got.Score, tt.wantScore)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("message: got %q, want it to hold %q", got.Message, tt.wantMessage)
			}
			if len(got.Tests) != tt.wantTests {
				t.Fatalf("tests: got %d, want %d", len(got.Tests), tt.wantTests)
			}
			// PrairieLearn's documented fields, and no others.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			for k := range m {
				if !strings.Contains(" gradable score message output tests ", " "+k+" ") {
					t.Errorf("results.json field %q: not one of PrairieLearn's", k)
				}
			}
			if tt.wantTests > 0 {
				test := m["tests"].([]any)[0].(map[string]any)
				for _, k := range []string{"name", "points", "max_points", "message", "output"} {
					if _, ok := test[k]; !ok {
						t.Errorf("test %v: no %q", test, k)
					}
				}
			}
		})
	}
}

func TestConvertPrairieLearnWithoutLabResults(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "results.json")
	if err := autograder.ConvertPrairieLearn(filepath.Join(dir, "missing.json"), out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, scored := got["score"]; got["gradable"] != false || scored {
		t.Errorf("got %s, want gradable false and no score", b)
	}
}

func TestPrairieLearnContext(t *testing.T) {
	defer fakeStage(t)()
	dir := filepath.Join(t.TempDir(), "grader")
	if err := autograder.PrairieLearn(context.Background(), autograder.Options{Module: module}, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Dockerfile", autograder.PLEntry, autograder.GradeScript, autograder.LabPath, "info-external.json", "not-graded.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	docker, _ := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if got, want := string(docker), `ENTRYPOINT ["/snacklab/`+autograder.PLEntry+`"]`; !strings.Contains(got, want) {
		t.Errorf("Dockerfile: got\n%s\nwant %s", got, want)
	}
	var info map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "info-external.json"))
	if err := json.Unmarshal(b, &info); err != nil {
		t.Errorf("info-external.json: %v", err)
	}
	if err := autograder.PrairieLearn(context.Background(), autograder.Options{Module: module}, dir); err == nil {
		t.Errorf("writing into a package already there: got no error, want ErrUsage")
	}
}
