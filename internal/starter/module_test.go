package starter_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/starter"
)

// The copy has every package and document but none of the answers: no
// marker, no solution code, no mutant.
func TestPlanLeavesOutTheAnswers(t *testing.T) {
	c, err := starter.Plan(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]starter.File{}
	for _, f := range c.Files {
		files[f.Path] = f
	}
	for _, want := range []string{"go.mod", "go.sum", "CONTRACT.md", "README.md", "run-lab.sh", "docs/lab.md", "docs/selftest.md",
		"queue/queue.go", "queue/schema.sql", "sender/sender.go", "receiver/receiver.go", "cmd/lab/main.go",
		"labsteps/step8_crash.go", "labsteps/mutants/mutants.go", "internal/starter/markers.go"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the copy lacks %s", want)
		}
	}
	if f := files["run-lab.sh"]; f.Mode&0o111 == 0 {
		t.Errorf("run-lab.sh is not executable in the copy (mode %v)", f.Mode)
	}
	for p, f := range files {
		switch {
		case strings.HasPrefix(p, ".git/"), strings.HasPrefix(p, ".ci/"), strings.HasPrefix(p, "bin/"),
			strings.HasSuffix(p, ".mutant"), strings.HasSuffix(p, ".variant"), p == "labsteps/mutants/embedded.go":
			t.Errorf("the copy has %s", p)
		}
		if strings.HasSuffix(p, ".go") {
			if _, err := starter.Scan(p, f.Data); err != nil {
				t.Errorf("%s in the copy: %v", p, err)
			}
			for _, line := range strings.Split(string(f.Data), "\n") {
				if l := strings.TrimSpace(line); strings.HasPrefix(l, "// BEGIN SOLUTION") || strings.HasPrefix(l, "// STARTER:") {
					t.Errorf("%s in the copy keeps a marker: %s", p, l)
				}
			}
		}
	}
	// Solution code the markers hide is gone; what the learner builds on stays.
	q := string(files["queue/queue.go"].Data)
	for _, gone := range []string{"ON CONFLICT (id) DO NOTHING", "fnv.New64a", "token = token + 1", "INSERT INTO redrives"} {
		if strings.Contains(q, gone) {
			t.Errorf("the copy's queue/queue.go still has %q", gone)
		}
	}
	for _, kept := range []string{"func (q *Queue) Claim(", "// TODO(claim):", "func scanJob(", "ErrNotImplemented"} {
		if !strings.Contains(q, kept) {
			t.Errorf("the copy's queue/queue.go lacks %q", kept)
		}
	}
	if len(c.Todos) != len(c.Regions) {
		t.Errorf("%d TODOs for %d regions", len(c.Todos), len(c.Regions))
	}
	if why := strings.Join(c.LeftOut, "\n"); !strings.Contains(why, "labsteps/mutants/check-then-act.mutant: ") {
		t.Errorf("left out does not name the mutants:\n%s", why)
	}
}

// Write refuses a directory that holds anything, and a file, writing nothing.
func TestWriteRefusesAnOccupiedDirectory(t *testing.T) {
	c := &starter.Copy{Files: []starter.File{{Path: "a/b.txt", Mode: 0o644, Data: []byte("b\n")}}}

	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(full); !errors.Is(err, starter.ErrNotEmpty) || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("Write into a non-empty dir: err %v, want ErrNotEmpty naming notes.txt", err)
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("Write into a non-empty dir wrote something: %v", entries)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(file); !errors.Is(err, starter.ErrNotEmpty) {
		t.Errorf("Write onto a file: err %v, want ErrNotEmpty", err)
	}

	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "new", "dir")} {
		if err := c.Write(dir); err != nil {
			t.Fatalf("Write into %s: %v", dir, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "a", "b.txt")); err != nil || string(b) != "b\n" {
			t.Errorf("Write into %s: a/b.txt = %q, %v", dir, b, err)
		}
	}
}
