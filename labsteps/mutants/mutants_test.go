package mutants_test

import (
	"fmt"
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
	for _, tc := range []struct {
		name, patch string
		step        int
		comment     string
		wantErr     bool
	}{
		{"ok", "# Claims at the wrong time.\n# step: 3\n--- a/x\n+++ b/x\n", 3, "Claims at the wrong time.", false},
		{"several steps", "# Claims at the wrong time.\n# step: 3, 7,8\n--- a/x\n", 3, "Claims at the wrong time.", false},
		{"a step twice", "# Claims.\n# step: 3, 3\n--- a/x\n", 0, "", true},
		{"empty step", "# Claims.\n# step:\n--- a/x\n", 0, "", true},
		{"no step", "# Claims at the wrong time.\n--- a/x\n", 0, "", true},
		{"bad step", "# Claims.\n# step: three\n--- a/x\n", 0, "", true},
		{"no comment", "# step: 3\n--- a/x\n", 0, "", true},
		{"no header", "--- a/x\n+++ b/x\n", 0, "", true},
		{"crash only", "# Splits the order.\n# crash: receiver\n--- a/x\n", 0, "Splits the order.", false},
		{"step and crash", "# Answers early.\n# step: 2\n# crash: enqueue, finish\n--- a/x\n", 2, "Answers early.", false},
		{"unknown crash program", "# Splits.\n# crash: queue\n--- a/x\n", 0, "", true},
		{"empty crash", "# Splits.\n# crash:\n--- a/x\n", 0, "", true},
		{"crash program twice", "# Splits.\n# crash: finish finish\n--- a/x\n", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := mutants.Parse(tc.name, []byte(tc.patch))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse: err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (m.Step != tc.step || m.Comment != tc.comment) {
				t.Errorf("Parse = step %d comment %q, want %d %q", m.Step, m.Comment, tc.step, tc.comment)
			}
		})
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
		if len(m.Steps) == 0 && len(m.Crash) == 0 {
			t.Errorf("%s: rejected by no step and no crash program", m.Name)
		}
		if len(m.Steps) > 0 && m.Step != m.Steps[0] {
			t.Errorf("%s: Step %d, Steps %v", m.Name, m.Step, m.Steps)
		}
		if !strings.HasSuffix(m.Comment, ".") || strings.Count(m.Comment, ". ") > 0 {
			t.Errorf("%s: the comment is not one sentence: %q", m.Name, m.Comment)
		}
		if !strings.Contains(string(m.Patch), "\n--- a/") {
			t.Errorf("%s: not a unified diff with a/ b/ paths", m.Name)
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

// Every mutant proves some clause's check can fail, so docs/selftest.md's
// clause table names each one: a mutant missing there is a check nobody
// can trace back to the contract, and a name there without a patch is a
// claim nothing proves.
func TestClauseTableNamesEveryMutant(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	a, b := strings.Index(s, "## Every clause graded"), strings.Index(s, "## `lab selftest`")
	if a < 0 || b < a {
		t.Fatal("docs/selftest.md has no clause table section before the `lab selftest` section")
	}
	table := s[a:b]
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range all {
		names[m.Name] = true
		if !strings.Contains(table, "`"+m.Name+"`") {
			t.Errorf("mutant %s is not in docs/selftest.md's clause table", m.Name)
		}
	}
	for _, f := range regexp.MustCompile("`([a-z0-9]+(?:-[a-z0-9]+)+)`").FindAllStringSubmatch(table, -1) {
		if !names[f[1]] && looksLikeMutant(f[1]) {
			t.Errorf("docs/selftest.md's clause table names %s, which is no mutant", f[1])
		}
	}
}

// looksLikeMutant tells a mutant's name from the other hyphenated code spans
// in the table: the invariants of lab crash (flags like `--url` never match).
func looksLikeMutant(name string) bool {
	switch name {
	case "durable-before-reported", "killed-op-atomic", "stock-matches-orders":
		return false
	}
	return true
}

// TestMutantTableMatchesTheHeaders keeps docs/selftest.md's table of mutants
// what the patches say: one row per mutant, with its sentence, its steps,
// its crash programs and the files it changes.
func TestMutantTableMatchesTheHeaders(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	a, b := strings.Index(s, "<!-- mutant table"), strings.Index(s, "<!-- end of mutant table -->")
	if a < 0 || b < a {
		t.Fatal("docs/selftest.md has no mutant table between its markers")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(s[a:b], "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "` |"); i > 0 {
				rows[name[:i]] = line
			}
		}
	}
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
		files := patchedFile.FindAllStringSubmatch(string(m.Patch), -1)
		names := []string{}
		for _, f := range files {
			if !slices.Contains(names, f[1]) {
				names = append(names, f[1])
			}
		}
		slices.Sort(names)
		want := fmt.Sprintf("| `%s` | %s | %s | %s | %s |", m.Name, m.Comment, strings.Join(steps, ", "),
			strings.Join(m.Crash, ", "), strings.Join(names, ", "))
		if got := rows[m.Name]; normalize(got) != normalize(want) {
			t.Errorf("mutant table row for %s:\n got %s\nwant %s", m.Name, got, want)
		}
	}
}

var (
	patchedFile = regexp.MustCompile(`(?m)^\+\+\+ b/(\S+)`)
	cellPadding = regexp.MustCompile(`\s*\|\s*`)
)

// normalize drops the cell padding a Markdown table may carry.
func normalize(row string) string { return cellPadding.ReplaceAllString(row, "|") }
