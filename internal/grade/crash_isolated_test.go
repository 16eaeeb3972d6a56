package grade_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"snacklab/internal/tier"
	"snacklab/labsteps/mutants"
)

// lab grade, isolated (the default), grades crash points and the power
// cut: in each submission's containers the lab traces and kills as the
// judge while the programs run as the judged. The reference gets both
// items' full marks; a mutant that answers before its commit is synced
// (synchronous OFF, a durability bug crash points catch) loses the crash
// item, with the reason.
func TestCrashPointsGradedIsolated(t *testing.T) {
	tier.Slow(t)
	needDocker(t)
	if !mutants.Available() {
		t.Skip("this copy of the module has no mutants")
	}
	root := t.TempDir()
	subs := filepath.Join(root, "cohort")
	ref := copyBin(t, filepath.Join(subs, "ref"))
	ms, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	var bad string
	for _, m := range ms {
		if m.Name == "synchronous-off" {
			mod, err := mutants.ModuleRoot(".")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			bin, err := m.Build(ctx, mod, t.TempDir())
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			bad = filepath.Join(subs, "synchronous-off")
			copyDir(t, bin, bad)
		}
	}
	if bad == "" {
		t.Fatal("no mutant synchronous-off")
	}
	t0 := time.Now()
	r := gradeCLI(t, filepath.Join(root, "out"), []string{"--points", "1=10,crashpoints=40,powercut=20", ref, bad})
	t.Logf("graded 2 submissions with crash points and the power cut, isolated, in %v", time.Since(t0).Round(time.Second))
	if r.code != 0 {
		t.Fatalf("lab grade: exit %d\n%s", r.code, r.console)
	}
	crashTest := func(name string) string {
		tests, _ := r.results[name]["tests"].([]any)
		for _, x := range tests {
			tc, _ := x.(map[string]any)
			if tc["max_score"] == 40.0 {
				return fmt.Sprintf("score %v: %v", tc["score"], tc["output"])
			}
		}
		return "no crash test in results.json"
	}
	if s := r.results["ref"]["score"]; s != 70.0 {
		t.Errorf("the reference scored %v isolated, want 70 (10 + crash points 40 + power cut 20); crash item: %s", s, crashTest("ref"))
	}
	if got := crashTest("synchronous-off"); !strings.HasPrefix(got, "score 0:") || !strings.Contains(got, "VIOLATION") {
		t.Errorf("synchronous-off's crash item: %s; want score 0 and its violations", got)
	}
}

// copyDir copies the three programs of a bin dir.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"queuectl", "sender", "receiver"} {
		b, err := os.ReadFile(filepath.Join(from, p))
		if err == nil {
			err = os.WriteFile(filepath.Join(to, p), b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
