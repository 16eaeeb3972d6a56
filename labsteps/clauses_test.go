package labsteps_test

import (
	"os"
	"testing"

	"snacklab/labsteps/clauses"
)

// Every check the steps make names a clause CONTRACT.md defines. The
// registry (labsteps/clauses) reads the h.Clause calls from the source;
// this reads what the checks carried when they ran: a passing run of the
// reference makes every check a passing run makes, so a check made before
// any h.Clause, or in a part that names none, shows up here.
func TestEveryCheckNamesAClause(t *testing.T) {
	doc, err := os.ReadFile("../CONTRACT.md")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := clauses.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, c := range cs {
		defined[c.ID] = true
	}
	for _, r := range reference(t) {
		if len(r.Checks) == 0 {
			t.Errorf("step %d made no check", r.Step.Num)
		}
		for _, c := range r.Checks {
			if len(c.Clause) == 0 {
				t.Errorf("step %d: the check %q names no clause (h.Clause before it)", r.Step.Num, c.What)
			}
			for _, id := range c.Clause {
				if !defined[id] {
					t.Errorf("step %d: the check %q names %s, which CONTRACT.md does not define", r.Step.Num, c.What, id)
				}
			}
		}
	}
}
