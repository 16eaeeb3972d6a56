package tier_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// .ci/slow-tests (awk over the test files) lists exactly the Test functions
// whose bodies call tier.Slow or tier.On, as Go's parser sees them: every
// slow test runs in .ci/run's slow stage, and no fast one runs there again.
func TestSlowTestsListsWhatTheParserSees(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, ".ci", "slow-tests")).Output()
	if err != nil {
		t.Fatalf(".ci/slow-tests: %v", err)
	}
	line := regexp.MustCompile(`^(\./\S+) \^\(([A-Za-z0-9_|]+)\)\$$`)
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf(".ci/slow-tests printed %q, want \"./pkg ^(TestA|TestB)$\"", l)
		}
		for _, name := range strings.Split(m[2], "|") {
			listed = append(listed, strings.TrimPrefix(m[1], "./")+" "+name)
		}
	}

	var parsed []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".git", d.Name() == "testdata", rel == "internal/tier":
				return filepath.SkipDir
			case rel != "." && fileExists(filepath.Join(path, "go.mod")):
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			slow := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "tier" && (sel.Sel.Name == "Slow" || sel.Sel.Name == "On") {
						slow = true
					}
				}
				return !slow
			})
			if slow {
				parsed = append(parsed, filepath.Dir(rel)+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	slices.Sort(parsed)
	if len(parsed) == 0 {
		t.Fatal("no Test function calls tier.Slow or tier.On")
	}
	if !slices.Equal(listed, parsed) {
		t.Errorf(".ci/slow-tests lists\n  %s\nthe parser finds\n  %s", strings.Join(listed, "\n  "), strings.Join(parsed, "\n  "))
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
