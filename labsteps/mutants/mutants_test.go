package mutants_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"snacklab/labsteps/mutants"
)

func TestParse(t *testing.T) {
	const body = "--- queue/queue.go\n<<<<<<< SEARCH\nlease_until <= ?1\n=======\nlease_until < ?1\n>>>>>>> REPLACE\n"
	for _, tc := range []struct {
		name, src string
		step      int
		comment   string
		clauses   []string
		wantErr   bool
	}{
		{"ok", "# Claims at the wrong time.\n# step: 3\n" + body, 3, "Claims at the wrong time.", nil, false},
		{"several steps", "# Claims at the wrong time.\n# step: 3, 7,8\n" + body, 3, "Claims at the wrong time.", nil, false},
		{"clauses", "# Claims.\n# step: 3\n# clause: §2.claim.expiry, §2.claim.order\n" + body, 3, "Claims.", []string{"§2.claim.expiry", "§2.claim.order"}, false},
		{"bad clause", "# Claims.\n# step: 3\n# clause: 2.claim\n" + body, 0, "", nil, true},
		{"clause twice", "# Claims.\n# step: 3\n# clause: §2.a §2.a\n" + body, 0, "", nil, true},
		{"a step twice", "# Claims.\n# step: 3, 3\n" + body, 0, "", nil, true},
		{"empty step", "# Claims.\n# step:\n" + body, 0, "", nil, true},
		{"no step", "# Claims at the wrong time.\n" + body, 0, "", nil, true},
		{"bad step", "# Claims.\n# step: three\n" + body, 0, "", nil, true},
		{"no comment", "# step: 3\n" + body, 0, "", nil, true},
		{"no header", body, 0, "", nil, true},
		{"crash only", "# Splits the order.\n# crash: receiver\n" + body, 0, "Splits the order.", nil, false},
		{"step and crash", "# Answers early.\n# step: 2\n# crash: enqueue, finish\n" + body, 2, "Answers early.", nil, false},
		{"unknown crash program", "# Splits.\n# crash: queue\n" + body, 0, "", nil, true},
		{"empty crash", "# Splits.\n# crash:\n" + body, 0, "", nil, true},
		{"crash program twice", "# Splits.\n# crash: finish finish\n" + body, 0, "", nil, true},
		{"no block", "# Claims.\n# step: 3\n--- queue/queue.go\n", 0, "", nil, true},
		{"no file", "# Claims.\n# step: 3\n", 0, "", nil, true},
		{"block before a file", "# Claims.\n# step: 3\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", 0, "", nil, true},
		{"unterminated block", "# Claims.\n# step: 3\n--- q.go\n<<<<<<< SEARCH\nx\n=======\ny\n", 0, "", nil, true},
		{"no divider", "# Claims.\n# step: 3\n--- q.go\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n", 0, "", nil, true},
		{"empty search", "# Claims.\n# step: 3\n--- q.go\n<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n", 0, "", nil, true},
		{"text outside a block", "# Claims.\n# step: 3\n--- q.go\nstray\n", 0, "", nil, true},
		{"path leaving the module", "# Claims.\n# step: 3\n--- ../x.go\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", 0, "", nil, true},
		{"absolute path", "# Claims.\n# step: 3\n--- /etc/x\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", 0, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := mutants.Parse(tc.name, []byte(tc.src))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse: err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (m.Step != tc.step || m.Comment != tc.comment || !slices.Equal(m.Clauses, tc.clauses)) {
				t.Errorf("Parse = step %d comment %q clauses %v, want %d %q %v", m.Step, m.Comment, m.Clauses, tc.step, tc.comment, tc.clauses)
			}
		})
	}
}

// Rewrite replaces each block's one occurrence in order, and refuses a
// search text found zero times or twice, naming the block: that is how a
// refactor of the reference shows which mutant it broke.
func TestRewrite(t *testing.T) {
	src := "# Two edits.\n# step: 1\n--- a.go\n<<<<<<< SEARCH\nb := 2\n=======\nb := 3\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nb := 3\nc := 4\n=======\nc := 5\n>>>>>>> REPLACE\n"
	m, err := mutants.Parse("two", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"applies in order", "a := 1\nb := 2\nc := 4\n", "a := 1\nc := 5\n", ""},
		{"a block whose lines were separated", "c := 4\nx\nb := 2\n", "", "block 2 of a.go: its search text is not found"},
		{"missing", "a := 1\n", "", "block 1 of a.go: its search text is not found"},
		{"twice", "b := 2\nb := 2\n", "", "block 1 of a.go: its search text is found 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Rewrite("a.go", tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Rewrite: err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Rewrite = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got, err := m.Rewrite("other.go", "b := 2\n"); err != nil || got != "b := 2\n" {
		t.Errorf("Rewrite of a file the mutant does not name = %q, %v; want it unchanged", got, err)
	}
}

// The embedded set: the seed's three wrong answers and check-then-act at
// their steps, and at least twelve in all, each with a one-sentence comment.
func TestAll(t *testing.T) {
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 12 {
		t.Errorf("%d mutants, want at least 12", len(all))
	}
	want := map[string]int{"expiry-boundary": 3, "token-reset": 5, "loose-ack": 6, "check-then-act": 7}
	crash := map[string]string{"receiver-stock-separate-tx": "receiver", "accept-before-commit": "enqueue",
		"synchronous-off": "enqueue", "finish-separate-tx": "finish"}
	for _, m := range all {
		for _, s := range m.Steps {
			if s < 1 || s > 8 {
				t.Errorf("%s: step %d, want 1-8", m.Name, s)
			}
		}
		if len(m.Steps) == 0 && len(m.Crash) == 0 && len(m.PowerCut) == 0 {
			t.Errorf("%s: rejected by no step, no crash program and no power cut", m.Name)
		}
		if len(m.Steps) > 0 && m.Step != m.Steps[0] {
			t.Errorf("%s: Step %d, Steps %v", m.Name, m.Step, m.Steps)
		}
		if !strings.HasSuffix(m.Comment, ".") || strings.Count(m.Comment, ". ") > 0 {
			t.Errorf("%s: the comment is not one sentence: %q", m.Name, m.Comment)
		}
		if len(m.Edits) == 0 {
			t.Errorf("%s: changes no file", m.Name)
		}
		if p, ok := crash[m.Name]; ok {
			if len(m.Crash) == 0 || m.Crash[0] != p {
				t.Errorf("%s: crash programs %v, want %s", m.Name, m.Crash, p)
			}
			delete(crash, m.Name)
		}
		if s, ok := want[m.Name]; ok {
			if s != m.Step {
				t.Errorf("%s: step %d, want %d", m.Name, m.Step, s)
			}
			delete(want, m.Name)
		}
	}
	for name := range want {
		t.Errorf("mutant %s is missing", name)
	}
	for name := range crash {
		t.Errorf("crash mutant %s is missing", name)
	}
}

// The variants: each a one-sentence comment, the clauses whose freedom it
// takes, and no step or crash line (every step must pass it); a header
// that names a step is refused.
func TestVariants(t *testing.T) {
	vs, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 8 {
		t.Errorf("%d variants, want at least 8", len(vs))
	}
	for _, v := range vs {
		if !v.Correct || len(v.Clauses) == 0 || len(v.Edits) == 0 {
			t.Errorf("%s: correct=%v clauses %v, %d edits; want a correct answer naming its clauses and changing something", v.Name, v.Correct, v.Clauses, len(v.Edits))
		}
		if !strings.HasSuffix(v.Comment, ".") || strings.Count(v.Comment, ". ") > 0 {
			t.Errorf("%s: the comment is not one sentence: %q", v.Name, v.Comment)
		}
	}
	const body = "--- q.go\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n"
	for _, src := range []string{"# Fine.\n# clause: §3.stderr\n# step: 3\n" + body, "# Fine.\n" + body, "# clause: §3.stderr\n" + body} {
		if _, err := mutants.ParseVariant("v", []byte(src)); err == nil {
			t.Errorf("ParseVariant(%q) succeeded; want an error", src)
		}
	}
	if v, err := mutants.ParseVariant("v", []byte("# Fine.\n# clause: §3.stderr\n"+body)); err != nil || v.FileName() != "v.variant" {
		t.Errorf("ParseVariant of a good variant: %v, file name %q", err, v.FileName())
	}
}

// TestMutantTableMatchesTheHeaders keeps docs/selftest.md's table of mutants
// what the mutants say: one row per mutant, with its sentence, its steps,
// its crash programs and the files it changes.
func TestMutantTableMatchesTheHeaders(t *testing.T) {
	rows := docTable(t, "mutant")
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(all) {
		t.Errorf("the mutant table has %d rows, want one per mutant: %d", len(rows), len(all))
	}
	for _, m := range all {
		steps := make([]string, len(m.Steps))
		for i, n := range m.Steps {
			steps[i] = strconv.Itoa(n)
		}
		names := m.Files()
		crash := strings.Join(m.Crash, ", ")
		if m.Batch > 1 {
			crash += fmt.Sprintf(" --batch %d", m.Batch)
		}
		if len(m.PowerCut) > 0 {
			crash = strings.TrimPrefix(crash+"; power cut: "+strings.Join(m.PowerCut, ", "), "; ")
		}
		want := fmt.Sprintf("| `%s` | %s | %s | %s | %s |", m.Name, m.Comment, strings.Join(steps, ", "),
			crash, strings.Join(names, ", "))
		if got := rows[m.Name]; normalize(got) != normalize(want) {
			t.Errorf("mutant table row for %s:\n got %s\nwant %s", m.Name, got, want)
		}
	}
}

var cellPadding = regexp.MustCompile(`\s*\|\s*`)

// normalize drops the cell padding a Markdown table may carry.
func normalize(row string) string { return cellPadding.ReplaceAllString(row, "|") }

// A refactor that reorders a file's functions leaves every mutant
// applicable: each file a mutant edits is rewritten with its top-level
// declarations (and their doc comments) in reverse order, and every block
// must still find its one occurrence there.
func TestMutantsSurviveReordering(t *testing.T) {
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	variants, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, variants...)
	root := filepath.Join("..", "..")
	reordered := map[string]string{}
	for _, m := range all {
		for _, f := range m.Files() {
			if _, ok := reordered[f]; ok || !strings.HasSuffix(f, ".go") {
				continue
			}
			reordered[f] = reverseDecls(t, filepath.Join(root, filepath.FromSlash(f)))
		}
	}
	for _, m := range all {
		for _, f := range m.Files() {
			src, ok := reordered[f]
			if !ok {
				continue
			}
			if _, err := m.Rewrite(f, src); err != nil {
				t.Errorf("after reordering %s: %v", f, err)
			}
		}
	}
}

// reverseDecls is the Go file at path with its top-level declarations in
// reverse order, each keeping its doc comment and the lines up to the next.
func reverseDecls(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int
	for _, d := range f.Decls {
		pos := d.Pos()
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil {
				pos = d.Doc.Pos()
			}
		case *ast.GenDecl:
			if d.Doc != nil {
				pos = d.Doc.Pos()
			}
		}
		starts = append(starts, fset.Position(pos).Offset)
	}
	if len(starts) == 0 {
		return string(src)
	}
	var chunks []string
	for i, s := range starts {
		end := len(src)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		chunk := string(src[s:end])
		if !strings.HasSuffix(chunk, "\n") {
			chunk += "\n"
		}
		chunks = append(chunks, chunk)
	}
	slices.Reverse(chunks)
	return string(src[:starts[0]]) + strings.Join(chunks, "")
}

// TestVariantTableMatchesTheHeaders keeps docs/selftest.md's table of
// variants what the variants say: one row per variant, with its sentence,
// its clauses and the files it changes.
func TestVariantTableMatchesTheHeaders(t *testing.T) {
	rows := docTable(t, "variant")
	vs, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(vs) {
		t.Errorf("the variant table has %d rows, want one per variant: %d", len(rows), len(vs))
	}
	for _, v := range vs {
		want := fmt.Sprintf("| `%s` | %s | %s | %s |", v.Name, v.Comment, strings.Join(v.Clauses, ", "), strings.Join(v.Files(), ", "))
		if got := rows[v.Name]; normalize(got) != normalize(want) {
			t.Errorf("variant table row for %s:\n got %s\nwant %s", v.Name, got, want)
		}
	}
}

// docTable reads docs/selftest.md's table of kind ("mutant", "variant")
// between its markers: each row by the name in its first cell.
func docTable(t *testing.T, kind string) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	a, b := strings.Index(s, "<!-- "+kind+" table"), strings.Index(s, "<!-- end of "+kind+" table -->")
	if a < 0 || b < a {
		t.Fatalf("docs/selftest.md has no %s table between its markers", kind)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(s[a:b], "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "` |"); i > 0 {
				rows[name[:i]] = line
			}
		}
	}
	return rows
}
