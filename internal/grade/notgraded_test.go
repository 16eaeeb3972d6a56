package grade_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"snacklab/internal/grade"
)

// NotGradedSources lists, from a cohort's output dir, the source paths of
// the submissions recorded as not graded, in name order, and nothing else.
func TestNotGradedSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		recs []grade.Record
		want []string
	}{
		{"none", []grade.Record{{Name: "alice", Source: "/c/alice"}}, nil},
		{"two of three", []grade.Record{
			{Name: "carol", Source: "/c/carol", NotGraded: "step 6 TIMEOUT"},
			{Name: "alice", Source: "/c/alice"},
			{Name: "bob", Source: "/c/bob", NotGraded: "interrupted"},
		}, []string{"/c/bob", "/c/carol"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			for _, r := range tc.recs {
				dir := filepath.Join(out, r.Name)
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := os.Create(filepath.Join(dir, "results.json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := grade.WriteResults(f, r); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			// A file and a dir without results are not rows.
			os.WriteFile(filepath.Join(out, "grades.csv"), []byte("x\n"), 0o644)
			os.Mkdir(filepath.Join(out, "logs"), 0o755)
			got, err := grade.NotGradedSources(out)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NotGradedSources = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := grade.NotGradedSources(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("NotGradedSources of a missing dir: got no error, want one")
	}
}
