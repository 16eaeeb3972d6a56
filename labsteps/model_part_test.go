package labsteps_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"snacklab/labsteps"
	"snacklab/labsteps/clauses"
	"snacklab/labsteps/model"
	"snacklab/labsteps/result"
)

// TestModelNamesEveryClause: the registry reads clause ids from the source,
// and the model part takes its failure's ids from the model's answers, so
// the part's literal list must hold every id a model answer names (over
// many more seeds than the part plays).
func TestModelNamesEveryClause(t *testing.T) {
	sites, err := clauses.Sites(".")
	if err != nil {
		t.Fatal(err)
	}
	named := func(id string) bool {
		return slices.ContainsFunc(sites[id], func(s clauses.Site) bool { return s.Func == "modelSeed" })
	}
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 200; seed++ {
		q := model.New()
		for _, op := range model.Generate(seed, labsteps.ModelOps) {
			m := &model.Mismatch{Expected: q.Apply(op)}
			for _, id := range m.Clauses() {
				if !seen[id] && !named(id) {
					t.Errorf("seed %d: a model answer names %s, which modelSeed does not write down", seed, id)
				}
				seen[id] = true
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("200 seeds named %d clauses, want the model's range: %v", len(seen), seen)
	}
}

// TestModelPartVerdicts: the model part alone fails a queuectl that gives a
// wrong answer nobody listed (a stale finish reported as applied), naming
// the clause and printing a replay of at most 10 commands; and a queuectl
// the lab cannot start mid-run is the lab's trouble, ERROR, never FAIL.
func TestModelPartVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         result.Verdict
		clause       string
	}{
		{"a stale finish exits 0", `"$REAL" "$@"; rc=$?
[ "$1" = finish ] && [ $rc = 12 ] && exit 0
exit $rc
`, result.Fail, "§2.finish.not-applied"},
		// After the first init the program is no longer executable: every
		// later start fails in the lab, not in the implementation.
		{"queuectl cannot be started", `"$REAL" "$@"; rc=$?
chmod -x "$0"
exit $rc
`, result.Error, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for _, p := range []string{"sender", "receiver"} {
				if err := os.Symlink(filepath.Join(refBin, p), filepath.Join(bin, p)); err != nil {
					t.Fatal(err)
				}
			}
			body := "#!/bin/sh\nREAL=" + filepath.Join(refBin, "queuectl") + "\n" + tc.script
			if err := os.WriteFile(filepath.Join(bin, "queuectl"), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			r := labsteps.RunStep(context.Background(), cfg(t, bin), labsteps.ModelOnly())
			if got := r.Verdict(); got != tc.want {
				t.Fatalf("verdict %s, want %s: %s", got, tc.want, r.Detail())
			}
			if tc.want != result.Fail {
				if !strings.Contains(r.Problem, "could not start") {
					t.Errorf("problem %q, want the start that failed", firstLine(r.Problem))
				}
				return
			}
			c := r.Failed()
			if !slices.Contains(c.Clause, tc.clause) {
				t.Errorf("failed check names %v, want %s among them", c.Clause, tc.clause)
			}
			_, cmds, _ := strings.Cut(c.Why, "these commands:\n")
			lines := strings.Split(strings.TrimSpace(cmds), "\n")
			if len(lines) < 2 || len(lines) > 10 || !strings.Contains(lines[0], "queuectl init --db q.db") {
				t.Errorf("replay is %d commands, want 2 … 10 starting with init:\n%s", len(lines), cmds)
			}
			for _, l := range lines[1:] {
				if !strings.HasPrefix(strings.TrimSpace(l), "queuectl ") || !strings.Contains(l, "--now-ms") {
					t.Errorf("replay line %q is not a queuectl command on the injected clock", l)
				}
			}
			t.Logf("%s\nexpected: %s\nobserved: %s\nwhy: %s", c.What, c.Expected, c.Observed, c.Why)
		})
	}
}
