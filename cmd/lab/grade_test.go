package main_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/tier"
)

// subDir makes a bin-dir submission linking the reference's executables.
func subDir(t *testing.T, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"queuectl", "sender", "receiver"} {
		if err := os.Symlink(filepath.Join(bin, p), filepath.Join(d, p)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestGradeUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no submissions", []string{"grade"}, "lab: grade: no submissions. Try: lab grade --out grades cohort/*\n"},
		{"unknown flag", []string{"grade", "--frobnicate", "x"}, "lab: grade: flag provided but not defined: -frobnicate. Try: lab grade -h\n"},
		{"shard out of range", []string{"grade", "--shard", "2/2", "x"}, "0 <= i < n"},
		{"bad points", []string{"grade", "--points", "9=10", "x"}, "want STEP=POINTS with STEP 1–8"},
		{"no runs", []string{"grade", "-n", "0", "x"}, "-n must be at least 1"},
		{"no jobs", []string{"grade", "--jobs", "0", "x"}, "--jobs must be at least 1"},
		{"no step time", []string{"grade", "--timeout", "-1s", "x"}, "time limits must be positive"},
		{"no build time", []string{"grade", "--build-timeout", "-1s", "x"}, "time limits must be positive"},
		{"merge without out", []string{"merge", "x"}, "lab: merge: want --out DIR and at least one SHARDDIR"},
		{"bad visibility", []string{"grade", "--visibility", "secret", "x"}, "--visibility \"secret\": want one of visible, hidden, after_due_date, after_published"},
		{"weight of a part not graded", []string{"grade", "--points", "1=10,6.c=2", "x"}, "part 6.c of a step that is not graded"},
		{"tables without out", []string{"tables"}, "lab: tables: want --out DIR and nothing else"},
		{"merge not a shard", []string{"merge", "--out", filepath.Join(t.TempDir(), "m"), bin}, "is not the output of lab grade"},
		{"not graded with submissions", []string{"grade", "--not-graded", t.TempDir(), "x"}, "give no SUBMISSION"},
		{"not graded into another out", []string{"grade", "--not-graded", t.TempDir(), "--out", t.TempDir()}, "writes into"},
		{"not graded of no cohort", []string{"grade", "--not-graded", filepath.Join(t.TempDir(), "none")}, "--not-graded: read the cohort's results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lab(t, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("lab %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.stderr)
			}
		})
	}
	if r := lab(t, "grade", "-h"); r.code != 0 || !strings.Contains(r.stdout, "usage: lab grade") || !strings.Contains(r.stdout, "-shard i/n") {
		t.Errorf("lab grade -h: exit %d, stdout %q", r.code, r.stdout)
	}
}

// A cohort with a missing path: the others are graded and reported, the
// missing one is named on stderr and recorded with 0 points, and the exit
// code is 2.
func TestGradeCLI(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	ann := subDir(t, root, "ann")
	missing := filepath.Join(root, "missing")
	r := lab(t, "grade", "--trusted", "--out", out, "--points", "retry=40,3=60", ann, missing, "--jobs", "2")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if want := "lab grade: " + missing + " does not exist\n"; !strings.HasPrefix(r.stderr, want) ||
		!strings.Contains(r.stderr, "lab: grade: 1 submission(s) not graded, recorded with 0 points: "+missing) {
		t.Errorf("stderr %q; want it to start with %q", r.stderr, want)
	}
	for _, want := range []string{"snacklab grade: 2 submission(s), 2 step(s)", "graded unisolated (--trusted)", "100/100", "ann", "2/2 steps", "0/100", "graded 2 submission(s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	var gs struct {
		Score float64 `json:"score"`
		Tests []struct {
			Number   string  `json:"number"`
			MaxScore float64 `json:"max_score"`
		} `json:"tests"`
	}
	b, err := os.ReadFile(filepath.Join(out, "ann", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	// One test per part: step 1's parts share its 40 points, step 3's a–f its 60.
	err = json.Unmarshal(b, &gs)
	step1, step3, parts3 := 0.0, 0.0, 0
	for _, tc := range gs.Tests {
		switch {
		case strings.HasPrefix(tc.Number, "1."):
			step1 += tc.MaxScore
		case strings.HasPrefix(tc.Number, "3."):
			step3 += tc.MaxScore
			parts3++
		}
	}
	if err != nil || gs.Score != 100 || parts3 != 6 || gs.Tests[len(gs.Tests)-1].Number != "3.f" || math.Abs(step1-40) > 1e-9 || math.Abs(step3-60) > 1e-9 {
		t.Errorf("results.json: %v %+v", err, gs)
	}
	for _, f := range []string{"ann/junit.xml", "ann/report.html", "missing/results.json", "grades.csv", "grades.md", "grades.html", "shard.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// Two shards graded by two commands and merged by a third; a missing shard
// is refused.
func TestGradeShardsAndMerge(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	root := t.TempDir()
	var subs []string
	for _, n := range []string{"ann", "bob", "cy"} {
		subs = append(subs, subDir(t, root, n))
	}
	for _, shard := range []string{"0/2", "1/2"} {
		args := append([]string{"grade", "--trusted", "--points", "1=100", "--shard", shard, "--out", filepath.Join(root, "s"+shard[:1])}, subs...)
		if r := lab(t, args...); r.code != 0 || !strings.Contains(r.stdout, "(shard "+shard+" of a cohort of 3)") {
			t.Fatalf("lab %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	m := filepath.Join(root, "merged")
	r := lab(t, "merge", "--out", m, filepath.Join(root, "s1"), filepath.Join(root, "s0"))
	if r.code != 0 || !strings.Contains(r.stdout, "merged 2 shard(s): 3 submission(s)") {
		t.Fatalf("lab merge: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	csv, err := os.ReadFile(filepath.Join(m, "grades.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(csv), ",100,100,100.0,graded,"); got != 3 {
		t.Errorf("grades.csv has %d full-mark rows, want 3:\n%s", got, csv)
	}
	r = lab(t, "merge", "--out", filepath.Join(root, "m2"), filepath.Join(root, "s0"))
	if r.code != 2 || !strings.Contains(r.stderr, "missing shards: 1/2") {
		t.Errorf("merge of one of two shards: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Without --trusted, lab grade isolates; with no Docker engine it refuses
// to grade and says what to do, rather than running the code unisolated.
func TestGradeIsolatesByDefault(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ann := subDir(t, root, "ann")
	cmd := exec.Command(filepath.Join(bin, "lab"), "grade", "--out", filepath.Join(root, "out"), ann)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+filepath.Join(root, "no-docker.sock"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "needs a Docker engine") || !strings.Contains(string(out), "--trusted") {
		t.Errorf("lab grade with no Docker engine: %v\n%s\nwant exit 1 saying it needs a Docker engine, or --trusted", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "out", "ann", "results.json")); err == nil {
		t.Errorf("a submission was graded without isolation")
	}
}
