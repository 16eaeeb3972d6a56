package autograder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/autograder"
	"snacklab/internal/grade"
)

func TestClassroom(t *testing.T) {
	tests := []struct {
		name, points string
		wantSteps    []int
	}{
		{"every step", "", []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{"two steps", "1=40,7=60", []int{1, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := autograder.Classroom(context.Background(), autograder.Options{Module: module, Points: tt.points}, filepath.Join(dir, "c")); err != nil {
				t.Fatal(err)
			}
			points := grade.DefaultPoints()
			if tt.points != "" {
				points, _ = grade.ParsePoints(tt.points)
			}
			// autograding.json: valid JSON, one test per step with its points.
			b, err := os.ReadFile(filepath.Join(dir, "c", autograder.ClassroomConfig))
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				Tests []struct {
					Name   string  `json:"name"`
					Run    string  `json:"run"`
					Points float64 `json:"points"`
				} `json:"tests"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatalf("autograding.json: %v", err)
			}
			if got, want := len(cfg.Tests), len(tt.wantSteps); got != want {
				t.Fatalf("autograding.json tests: got %d, want %d", got, want)
			}
			for i, n := range tt.wantSteps {
				if got, want := cfg.Tests[i].Name, fmt.Sprintf("Step %d: ", n); !strings.HasPrefix(got, want) {
					t.Errorf("test %d: got %q, want it to start %q", i, got, want)
				}
				if got, want := cfg.Tests[i].Points, points[n]; got != want {
					t.Errorf("test %d points: got %v, want %v", i, got, want)
				}
				if got, want := cfg.Tests[i].Run, "--judged-uid"; !strings.Contains(got, want) {
					t.Errorf("test %d run: got %q, want the programs as another uid (%s)", i, got, want)
				}
			}
			// The workflow: its structure checked textually (no YAML
			// library in go.sum that is still kept).
			y, err := os.ReadFile(filepath.Join(dir, "c", autograder.ClassroomWorkflow))
			if err != nil {
				t.Fatal(err)
			}
			wf := string(y)
			if strings.Contains(wf, "\t") {
				t.Errorf("workflow: a tab (YAML indents with spaces)")
			}
			var ids []string
			for _, n := range tt.wantSteps {
				id := fmt.Sprintf("step%d", n)
				ids = append(ids, id)
				for _, want := range []string{
					"        id: " + id + "\n",
					fmt.Sprintf("          test-name: \"Step %d: ", n),
					fmt.Sprintf("--junit /tmp/snacklab/junit/step%d.xml %d\"\n", n, n),
					fmt.Sprintf("          max-score: %v\n", points[n]),
					fmt.Sprintf("          STEP%d_RESULTS: \"${{steps.%s.outputs.result}}\"\n", n, id),
				} {
					if !strings.Contains(wf, want) {
						t.Errorf("workflow: no %q", want)
					}
				}
			}
			for _, want := range []string{"uses: classroom-resources/autograding-command-grader@v1", "uses: actions/upload-artifact@v4",
				"uses: classroom-resources/autograding-grading-reporter@v1", "          runners: " + strings.Join(ids, ",") + "\n"} {
				if !strings.Contains(wf, want) {
					t.Errorf("workflow: no %q", want)
				}
			}
			if got, want := strings.Count(wf, "autograding-command-grader@v1"), len(tt.wantSteps); got != want {
				t.Errorf("workflow: %d graded steps, want %d", got, want)
			}
		})
	}
}
