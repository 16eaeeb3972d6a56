package clauses_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"snacklab/internal/crash"
	"snacklab/labsteps/clauses"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/result"
)

var update = flag.Bool("update", false, "rewrite docs/clauses.md from the sources")

// root is the module root, from this package's directory.
const root = "../.."

// registry builds the registry from the module's own sources.
func registry(t *testing.T) clauses.Registry {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "CONTRACT.md"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := clauses.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	sites, err := clauses.Sites(filepath.Join(root, "labsteps"), filepath.Join(root, "labsteps", "harness"))
	if err != nil {
		t.Fatal(err)
	}
	ungraded, err := clauses.ReadUngraded(filepath.Join(root, "labsteps", "ungraded.txt"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	var ms []clauses.Mutant
	for _, m := range all {
		ms = append(ms, clauses.Mutant{Name: m.Name, Clauses: m.Clauses, Steps: m.Steps, Crash: append(slices.Clone(m.Crash), m.PowerCut...)})
	}
	vs, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	var variants []clauses.Mutant
	for _, v := range vs {
		variants = append(variants, clauses.Mutant{Name: v.Name, Clauses: v.Clauses})
	}
	return clauses.Registry{Version: result.ContractVersion, Clauses: cs, Checks: sites, Crash: crash.InvariantClauses, Mutants: ms,
		Variants: variants, Ungraded: ungraded}
}

// TestClauseRegistry is the registry's rule: every clause of CONTRACT.md
// has a check that names it and a mutant that breaks it, or is listed in
// labsteps/ungraded.txt with why; every id a check, invariant, mutant or
// that list names is defined; every mutant names a clause that a check of
// its step names; and a listed clause that gained both leaves the list.
func TestClauseRegistry(t *testing.T) {
	r := registry(t)
	for _, p := range r.Problems() {
		t.Error(p)
	}
	graded := 0
	for _, c := range r.Clauses {
		if r.Graded(c.ID) {
			graded++
		}
	}
	t.Logf("%d clauses, %d graded, %d listed as not graded yet", len(r.Clauses), graded, len(r.Ungraded))
}

// TestClausesDoc keeps docs/clauses.md what the sources say; -update
// rewrites it.
func TestClausesDoc(t *testing.T) {
	got := registry(t).Markdown()
	path := filepath.Join(root, "docs", "clauses.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/clauses.md is out of date: run go test ./labsteps/clauses -run TestClausesDoc -update")
	}
}

// The contract's title names the version every report prints.
func TestContractVersionIsTheReports(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "CONTRACT.md"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(doc), "\n")
	if got, want := first, fmt.Sprintf("# snacklab contract, version %d", result.ContractVersion); got != want {
		t.Errorf("CONTRACT.md's title = %q, want %q (result.ContractVersion)", got, want)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^### Version %d\b`, result.ContractVersion)).Match(doc) {
		t.Errorf("CONTRACT.md's changelog has no section \"### Version %d\"", result.ContractVersion)
	}
}

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		doc     string
		want    []clauses.Clause
		wantErr bool
	}{
		"two rules in a paragraph": {doc: "Intro.\n\nA job is kept [§2.state.keep]. Reason when dead [§2.state.reason].",
			want: []clauses.Clause{{ID: "§2.state.keep", Text: "A job is kept"}, {ID: "§2.state.reason", Text: "Reason when dead"}}},
		"a table cell": {doc: "| qty | integer 1 … 1000000 [§1.qty] | invalid |",
			want: []clauses.Clause{{ID: "§1.qty", Text: "qty: integer 1 … 1000000"}}},
		"a citation is no definition": {doc: "See `§1.qty` and (§1.qty). Rule [§1.id].",
			want: []clauses.Clause{{ID: "§1.id", Text: "See `§1.qty` and (§1.qty). Rule"}}},
		"defined twice":   {doc: "a [§1.id] b [§1.id]", wantErr: true},
		"nothing defined": {doc: "no rules here", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := clauses.Parse([]byte(tc.doc))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse error = %v, want error %t", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Parse = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseUngraded(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		"comments and blanks": {in: "# why\n\n§1.id   no mutant yet\n", want: map[string]string{"§1.id": "no mutant yet"}},
		"no reason":           {in: "§1.id\n", wantErr: true},
		"not an id":           {in: "1.id because\n", wantErr: true},
		"twice":               {in: "§1.id a\n§1.id b\n", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := clauses.ParseUngraded([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseUngraded error = %v, want error %t", err, tc.wantErr)
			}
			if !tc.wantErr && fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ParseUngraded = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSites(t *testing.T) {
	for name, tc := range map[string]struct {
		src     string
		want    string
		wantErr bool
	}{
		"literals": {src: "func partA(h *H) {\n\th.Clause(\"§1.id\", \"§1.qty\")\n}\n",
			want: "map[§1.id:[step4_x.go:7 (partA)] §1.qty:[step4_x.go:7 (partA)]]"},
		"inside a closure": {src: "func partB(h *H) {\n\tf := func() { h.Clause(\"§2.atomic\") }\n\tf()\n}\n",
			want: "map[§2.atomic:[step4_x.go:7 (partB)]]"},
		"a variable, no id written": {src: "func partC(h *H, id string) {\n\th.Clause(id)\n}\n", wantErr: true},
		"ids from a table": {src: "func partF(h *H) {\n\tfor _, id := range []string{\"§3.help\", \"§4.help\"} {\n\t\th.Clause(id)\n\t}\n}\n",
			want: "map[§3.help:[step4_x.go:8 (partF)] §4.help:[step4_x.go:8 (partF)]]"},
		"not an id":      {src: "func partD(h *H) {\n\th.Clause(\"2.atomic\")\n}\n", wantErr: true},
		"no call at all": {src: "func partE(h *H) {}\n", want: "map[]"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package p\n\ntype H struct{}\n\nfunc (H) Clause(...string) {}\n" + tc.src
			if err := os.WriteFile(filepath.Join(dir, "step4_x.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := clauses.Sites(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sites error = %v, want error %t", err, tc.wantErr)
			}
			if !tc.wantErr && fmt.Sprint(got) != tc.want {
				t.Errorf("Sites = %v, want %s", got, tc.want)
			}
			for _, ss := range got {
				for _, s := range ss {
					if !slices.Equal(s.Steps, []int{4}) {
						t.Errorf("%v.Steps = %v, want [4]", s, s.Steps)
					}
				}
			}
		})
	}
}

// A part kept in a file of its own belongs to the steps whose files name it,
// and so do the helpers it calls.
func TestSitesFollowTheStepsThatReachThem(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"step2_a.go": "package p\n\ntype H struct{}\n\nfunc (H) Clause(...string) {}\n\nfunc runStep2(h H) { parts(partX) }\n\nfunc parts(...func(H)) {}\n",
		"step5_b.go": "package p\n\nfunc runStep5(h H) { helper(h) }\n",
		"extra.go":   "package p\n\nfunc partX(h H) { helper(h) }\n\nfunc helper(h H) { h.Clause(\"§2.atomic\") }\n\nfunc unused(h H) { h.Clause(\"§1.id\") }\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := clauses.Sites(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]int{"§2.atomic": {2, 5}, "§1.id": nil} {
		if len(got[id]) != 1 || !slices.Equal(got[id][0].Steps, want) {
			t.Errorf("Sites()[%s] = %+v, want one site reached by steps %v", id, got[id], want)
		}
	}
}

// Every step and part names a clause before its first check: a part starts
// with none, so a check made earlier would name none. (TestEveryCheckNamesAClause
// in labsteps proves it by running the reference; this says so at once.)
func TestEveryPartNamesAClauseFirst(t *testing.T) {
	bad, err := clauses.UnnamedParts(filepath.Join(root, "labsteps"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func TestUnnamedParts(t *testing.T) {
	src := `package p

type H struct{}

func (H) Clause(...string) {}
func (H) Init()            {}
func (H) Parallel(...Part) {}

type Part struct{ Run func(H) }

func runStep(h H) {
	h.Parallel(Part{Run: good}, Part{Run: bad}, Part{Run: func(h H) { helper(h) }}, Part{Run: func(h H) { late(h) }})
}

func good(h H) {
	const n = 1
	h.Clause("§1.id")
	h.Init()
}

func bad(h H) {
	h.Init()
	h.Clause("§1.id")
}

func helper(h H) { h.Clause("§1.id"); h.Init() }

func late(h H) { h.Init() }
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "step1_x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := clauses.UnnamedParts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], "calls h.Init before naming a clause") || !strings.Contains(got[1], "late calls h.Init") {
		t.Errorf("UnnamedParts = %q, want bad and late named", got)
	}
}
