package clauses

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Mutant is what the registry needs of a bundled mutant
// (labsteps/mutants.Mutant).
type Mutant struct {
	Name    string
	Clauses []string // its "# clause:" header
	Steps   []int    // the steps that must reject it
	Crash   []string // the lab crash or power-cut programs that must
}

// Registry is, for every clause of the contract, what grades it.
type Registry struct {
	Version int      // the contract's version, for the table's heading
	Clauses []Clause // as the contract defines them, in order
	// Checks maps a clause to the h.Clause calls that name it (Sites).
	Checks map[string][]Site
	// Crash maps a lab crash invariant to the clauses it judges.
	Crash map[string][]string
	// Mutants are the bundled wrong answers.
	Mutants []Mutant
	// Variants are the bundled correct answers that take a freedom of the
	// clauses they name (every step must pass them).
	Variants []Mutant
	// Ungraded maps a clause not graded yet to why (labsteps/ungraded.txt).
	Ungraded map[string]string
}

// defined reports whether the contract defines id.
func (r Registry) defined(id string) bool {
	return slices.ContainsFunc(r.Clauses, func(c Clause) bool { return c.ID == id })
}

// mutantsOf lists the mutants whose header names id.
func (r Registry) mutantsOf(id string) []string { return naming(r.Mutants, id) }

// variantsOf lists the variants whose header names id.
func (r Registry) variantsOf(id string) []string { return naming(r.Variants, id) }

// naming lists the names of ms whose header names id.
func naming(ms []Mutant, id string) []string {
	var out []string
	for _, m := range ms {
		if slices.Contains(m.Clauses, id) {
			out = append(out, m.Name)
		}
	}
	return out
}

// invariantsOf lists the lab crash invariants that judge id.
func (r Registry) invariantsOf(id string) []string {
	var out []string
	for _, inv := range sortedKeys(r.Crash) {
		if slices.Contains(r.Crash[inv], id) {
			out = append(out, inv)
		}
	}
	return out
}

// Graded reports whether a check (an h.Clause call, or a lab crash
// invariant) judges the clause and a mutant proves that it can fail.
func (r Registry) Graded(id string) bool {
	return (len(r.Checks[id]) > 0 || len(r.invariantsOf(id)) > 0) && len(r.mutantsOf(id)) > 0
}

// Problems lists every way the sources disagree: a check, an invariant, a
// mutant or the ungraded list naming a clause the contract does not define;
// a mutant naming no clause, or none that a check of its step names; a
// clause without a check or a mutant that is not listed as ungraded; and a
// listed clause that has both now, so that the list only shrinks.
func (r Registry) Problems() []string {
	var out []string
	for _, id := range sortedKeys(r.Checks) {
		if !r.defined(id) {
			out = append(out, fmt.Sprintf("%s names %s, which CONTRACT.md does not define", r.Checks[id][0], id))
		}
	}
	for _, inv := range sortedKeys(r.Crash) {
		for _, id := range r.Crash[inv] {
			if !r.defined(id) {
				out = append(out, fmt.Sprintf("lab crash invariant %s judges %s, which CONTRACT.md does not define", inv, id))
			}
		}
	}
	for _, m := range r.Mutants {
		out = append(out, r.mutantProblems(m)...)
	}
	for _, v := range r.Variants {
		if len(v.Clauses) == 0 {
			out = append(out, fmt.Sprintf("variant %s names no clause (\"# clause: §N.word\")", v.Name))
		}
		for _, id := range v.Clauses {
			if !r.defined(id) {
				out = append(out, fmt.Sprintf("variant %s names %s, which CONTRACT.md does not define", v.Name, id))
			}
		}
	}
	for _, id := range sortedKeys(r.Ungraded) {
		if !r.defined(id) {
			out = append(out, fmt.Sprintf("ungraded.txt lists %s, which CONTRACT.md does not define", id))
		}
	}
	for _, c := range r.Clauses {
		_, listed := r.Ungraded[c.ID]
		switch {
		case r.Graded(c.ID) && listed:
			out = append(out, fmt.Sprintf("%s now has a check and a mutant: remove it from ungraded.txt", c.ID))
		case !r.Graded(c.ID) && !listed:
			out = append(out, fmt.Sprintf("%s has %s: grade it (h.Clause before its checks, \"# clause: %s\" on a mutant they reject) or list it in ungraded.txt with why",
				c.ID, r.missing(c.ID), c.ID))
		}
	}
	return out
}

// missing says what a clause lacks.
func (r Registry) missing(id string) string {
	var no []string
	if len(r.Checks[id]) == 0 && len(r.invariantsOf(id)) == 0 {
		no = append(no, "no check")
	}
	if len(r.mutantsOf(id)) == 0 {
		no = append(no, "no mutant")
	}
	return strings.Join(no, " and ")
}

// mutantProblems checks one mutant's clauses against the contract and the
// checks of the steps that must reject it: a step can only reject a wrong
// answer with a check that names a clause the wrong answer breaks.
func (r Registry) mutantProblems(m Mutant) []string {
	if len(m.Clauses) == 0 {
		return []string{fmt.Sprintf("mutant %s names no clause (\"# clause: §N.word\")", m.Name)}
	}
	var out []string
	for _, id := range m.Clauses {
		if !r.defined(id) {
			out = append(out, fmt.Sprintf("mutant %s names %s, which CONTRACT.md does not define", m.Name, id))
		}
	}
	for _, step := range m.Steps {
		if !slices.ContainsFunc(m.Clauses, func(id string) bool {
			return slices.ContainsFunc(r.Checks[id], func(s Site) bool { return slices.Contains(s.Steps, step) })
		}) {
			out = append(out, fmt.Sprintf("mutant %s must be rejected by step %d, but no check of step %d names its clauses %v", m.Name, step, step, m.Clauses))
		}
	}
	if len(m.Crash) > 0 && !slices.ContainsFunc(m.Clauses, func(id string) bool { return len(r.invariantsOf(id)) > 0 }) {
		out = append(out, fmt.Sprintf("mutant %s must be caught by lab crash (%v), but no invariant judges its clauses %v", m.Name, m.Crash, m.Clauses))
	}
	return out
}

// Markdown is the table docs/clauses.md: every clause, the checks and
// invariants that judge it, the mutants that break it, and why it is not
// graded yet where it is not.
func (r Registry) Markdown() []byte {
	var b bytes.Buffer
	graded := 0
	for _, c := range r.Clauses {
		if r.Graded(c.ID) {
			graded++
		}
	}
	fmt.Fprintf(&b, "# What grades each clause of CONTRACT.md\n\n")
	fmt.Fprintf(&b, "<!-- Generated by `go test ./labsteps/clauses -run TestClausesDoc -update` from CONTRACT.md, the\n"+
		"h.Clause calls of labsteps, internal/crash.InvariantClauses, the mutants' \"# clause:\" headers and\n"+
		"labsteps/ungraded.txt. Do not edit: change those and regenerate. -->\n\n")
	fmt.Fprintf(&b, "CONTRACT.md version %d defines %d clauses: %d graded (a check names the clause and a bundled\n"+
		"mutant that breaks it is rejected), %d not graded yet (the last column says why).\n"+
		"A check is a step and the function of labsteps whose `h.Clause` names the clause, or an invariant\n"+
		"of `lab crash`. A variant is a correct answer that takes a freedom the clause leaves; every step\n"+
		"must pass it (docs/selftest.md). The registry test (`go test ./labsteps/clauses`) fails when these\n"+
		"disagree.\n\n",
		r.Version, len(r.Clauses), graded, len(r.Clauses)-graded)
	b.WriteString("| clause | rule | checks | mutants | variants | not graded yet because |\n|---|---|---|---|---|---|\n")
	quoted := func(names []string) string {
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		return strings.Join(names, ", ")
	}
	for _, c := range r.Clauses {
		why := r.Ungraded[c.ID]
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", c.ID, cell(c.Text), cell(r.checkText(c.ID)),
			quoted(r.mutantsOf(c.ID)), quoted(r.variantsOf(c.ID)), cell(why))
	}
	return b.Bytes()
}

// checkText lists a clause's checks: "step 3: claimLease, claimSpent; lab crash: killed-op-atomic".
func (r Registry) checkText(id string) string {
	// One entry per (step, function): a site reached by no step is listed
	// under its file.
	type entry struct {
		where string
		step  int
		file  string
		line  int
		fn    string
	}
	var es []entry
	for _, s := range r.Checks[id] {
		if len(s.Steps) == 0 {
			es = append(es, entry{s.File, 1 << 30, s.File, s.Line, s.Func})
		}
		for _, n := range s.Steps {
			es = append(es, entry{fmt.Sprintf("step %d", n), n, s.File, s.Line, s.Func})
		}
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].step != es[j].step {
			return es[i].step < es[j].step
		}
		return es[i].file < es[j].file || es[i].file == es[j].file && es[i].line < es[j].line
	})
	var groups []string
	var cur string
	var funcs []string
	flush := func() {
		if cur != "" {
			groups = append(groups, cur+": "+strings.Join(funcs, ", "))
		}
	}
	for _, e := range es {
		if e.where != cur {
			flush()
			cur, funcs = e.where, nil
		}
		if !slices.Contains(funcs, e.fn) {
			funcs = append(funcs, e.fn)
		}
	}
	flush()
	if inv := r.invariantsOf(id); len(inv) > 0 {
		groups = append(groups, "lab crash: "+strings.Join(inv, ", "))
	}
	return strings.Join(groups, "; ")
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\|`, "|"), "|", `\|`)
}

// String prints a site as file:line (function).
func (s Site) String() string { return fmt.Sprintf("%s:%d (%s)", s.File, s.Line, s.Func) }
