package labsteps_test

import (
	"testing"

	"snacklab/labsteps"
	"snacklab/labsteps/clauses"
	"snacklab/labsteps/rules"
)

// TestGeneratedNamesEveryRuleClause: the registry reads clause ids from the
// source, and the generated part takes its ids from labsteps/rules, so the
// part's literal list (its first h.Clause) must hold every id a generated
// case can name; this keeps the list and the rules together.
func TestGeneratedNamesEveryRuleClause(t *testing.T) {
	sites, err := clauses.Sites(".")
	if err != nil {
		t.Fatal(err)
	}
	named := func(id string) bool {
		for _, s := range sites[id] {
			if s.Func == "generatedValues" {
				return true
			}
		}
		return false
	}
	for _, in := range rules.Inputs() {
		for _, c := range in.Cases() {
			for _, id := range labsteps.CaseClauses(in, c) {
				if !named(id) {
					t.Errorf("%s, case %s names %s, which generatedValues does not write down", in.Name(), c.Name, id)
				}
			}
		}
	}
}
