package main_test

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A directory of three cloned repositories grades as three rows, each
// named after its repository.
func TestGradeFromRepos(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	repos := filepath.Join(root, "repos")
	names := []string{"lab-alice", "lab-bob", "lab-carol"}
	for _, n := range names {
		d := subDir(t, repos, n)
		if err := os.MkdirAll(filepath.Join(d, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(root, "out")
	r := lab(t, "grade", "--trusted", "--out", out, "--points", "retry=100", "--jobs", "2", "--from-repos", repos)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(out, "grades.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range rows[1:] {
		got = append(got, row[0])
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Errorf("grades.csv submissions: got %v, want %v", got, names)
	}
}

func TestAutograderUsageErrors(t *testing.T) {
	t.Parallel()
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no platform", []string{"autograder"}, "which platform?"},
		{"unknown platform", []string{"autograder", "moodle", "--out", "x"}, `unknown platform "moodle"`},
		{"no out", []string{"autograder", "gradescope"}, "--out is required"},
		{"bad points", []string{"autograder", "classroom", "--out", filepath.Join(t.TempDir(), "c"), "--points", "9=10"}, "want STEP=POINTS"},
		{"out not empty", []string{"autograder", "classroom", "--out", notEmpty}, "is not empty; nothing written"},
		{"from-repos missing", []string{"grade", "--trusted", "--from-repos", filepath.Join(notEmpty, "nope")}, "--from-repos"},
		{"from-repos empty", []string{"grade", "--trusted", "--from-repos", t.TempDir()}, "no repositories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lab(t, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("lab %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.stderr)
			}
		})
	}
}

// A Gradescope export (its unpacked directory) grades as one row per
// submission, with its submitters joined from the roster lab grade wrote.
func TestGradeFromGradescope(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	export := filepath.Join(root, "export")
	subDir(t, export, "submission_1")
	subDir(t, export, "submission_2")
	yml := "submission_1:\n  :submitters:\n  - :name: Ann Lee\n    :sid: '100'\n    :email: ann@example.edu\n  :score: 1.0\n" +
		"submission_2:\n  :submitters:\n  - :name: Bo\n    :sid: '200'\n    :email: bo@example.edu\n  - :name: Cy\n    :sid: '201'\n    :email: cy@example.edu\n"
	if err := os.WriteFile(filepath.Join(export, "submission_metadata.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out")
	r := lab(t, "grade", "--trusted", "--out", out, "--points", "retry=100", "--jobs", "2", "--from-gradescope", export)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(out, "grades.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var got []string
	for _, row := range rows[1:] {
		got = append(got, strings.Join([]string{row[0], row[col["student_id"]], row[col["name"]], row[col["email"]]}, "|"))
	}
	slices.Sort(got)
	want := []string{"submission_1|100|Ann Lee|ann@example.edu", "submission_2|200; 201|Bo; Cy|bo@example.edu; cy@example.edu"}
	if !slices.Equal(got, want) {
		t.Errorf("grades.csv: got %v, want %v", got, want)
	}
}

func TestGradeFromGradescopeUsageErrors(t *testing.T) {
	t.Parallel()
	noYml := t.TempDir()
	subDir(t, noYml, "submission_1")
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing", []string{"--from-gradescope", filepath.Join(noYml, "nope.zip")}, "--from-gradescope"},
		{"no yml", []string{"--from-gradescope", noYml}, "no submission_metadata.yml"},
		{"not a zip", []string{"--from-gradescope", filepath.Join(noYml, "submission_1", "sender")}, "not a Gradescope submissions export"},
		{"with a submission", []string{"--from-gradescope", noYml, filepath.Join(noYml, "submission_1")}, "give no SUBMISSION"},
		{"with --roster", []string{"--from-gradescope", noYml, "--roster", filepath.Join(noYml, "r.csv")}, "--roster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"grade", "--trusted", "--out", out}, tc.args...)
			r := lab(t, args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("lab %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(args, " "), r.code, r.stderr, tc.stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("lab %s wrote %s", strings.Join(args, " "), out)
			}
		})
	}
}
