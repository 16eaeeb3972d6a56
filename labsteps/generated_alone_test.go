package labsteps_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/rules"
)

// TestGeneratedAloneRejects is the ablation of issue 34, run on demand
// (SNACKLAB_GENERATED_ALONE=1; =name,name… for some mutants): the generated
// part alone, without any hand-written check, against every bundled mutant
// that breaks a clause a generated case names. It logs each verdict and the
// share rejected; it fails only on a mutant that cannot be built.
func TestGeneratedAloneRejects(t *testing.T) {
	only := os.Getenv("SNACKLAB_GENERATED_ALONE")
	if only == "" || !mutants.Available() {
		t.Skip("SNACKLAB_GENERATED_ALONE=1 measures the generated part alone against the value-rule mutants")
	}
	named := map[string]bool{}
	for _, in := range rules.Inputs() {
		for _, c := range in.Cases() {
			for _, id := range labsteps.CaseClauses(in, c) {
				named[id] = true
			}
		}
	}
	delete(named, "§6.nothing-written") // every refusal names it; it says nothing of a value rule
	delete(named, "§6.codes")
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	var rejected, tried []string
	for _, m := range all {
		if len(m.Steps) == 0 || !slices.ContainsFunc(m.Clauses, func(id string) bool { return named[id] }) {
			continue
		}
		if only != "1" && !slices.Contains(strings.Split(only, ","), m.Name) {
			continue
		}
		bin, err := m.Build(context.Background(), root, filepath.Join(t.TempDir(), m.Name))
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		r := labsteps.RunStep(context.Background(), labsteps.Config{Bin: bin, StepTimeout: 5 * time.Minute}, labsteps.GeneratedOnly())
		tried = append(tried, m.Name)
		verdict := "passes"
		if !r.Pass {
			rejected, verdict = append(rejected, m.Name), "rejected: "+firstLine(r.Detail())
		}
		t.Logf("%-40s %s %s", m.Name, strings.Join(m.Clauses, " "), verdict)
	}
	t.Logf("the generated part alone rejects %d of %d value-rule mutants: %s", len(rejected), len(tried), strings.Join(rejected, " "))
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "✗") {
			return strings.TrimSpace(l)
		}
	}
	s, _, _ = strings.Cut(s, "\n")
	return s
}
