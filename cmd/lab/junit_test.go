package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/junittest"
)

// Every junit.xml lab run and lab grade write passes the schema Jenkins'
// xUnit plugin validates against: a graded submission and a missing one.
func TestJUnitFilesValidate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	ann := subDir(t, root, "ann")
	r := lab(t, "grade", "--out", out, "--points", "retry=10", ann, filepath.Join(root, "missing"))
	if r.code != 2 {
		t.Fatalf("lab grade: exit %d, want 2 (one submission missing)\n%s%s", r.code, r.stdout, r.stderr)
	}
	run := filepath.Join(root, "run.xml")
	if r := lab(t, "retry", "--junit", run); r.code != 0 || !strings.Contains(r.stdout, "✓ 1 retry") {
		t.Fatalf("lab run retry (step 1 by its name): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{filepath.Join(out, "ann", "junit.xml"), filepath.Join(out, "missing", "junit.xml"), run} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Error(err)
			continue
		}
		junittest.Validate(t, f, b)
	}
}
