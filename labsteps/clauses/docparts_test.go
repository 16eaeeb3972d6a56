package clauses_test

import (
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

	"snacklab/labsteps/result"
)

// TestLabDocListsEachPart keeps docs/lab.md's lettered parts what the steps
// declare (issue #35: step 6 was "twenty-one, a to u" there while the lab
// ran a to v): a step whose section in lab.md lists its parts as bullets
// (`- **a** …`, `- **b–e** …`) must list exactly the letters of the
// harness.Part literals in its runStepN, no more and no fewer. Step 6's
// section must keep its bullets, so that this test checks something.
func TestLabDocListsEachPart(t *testing.T) {
	declared := declaredParts(t, filepath.Join(root, "labsteps"))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "lab.md"))
	if err != nil {
		t.Fatal(err)
	}
	bullet := regexp.MustCompile(`(?m)^- \*\*([a-z])(?:–([a-z]))?\*\*`)
	header := regexp.MustCompile(`^(\d+) · `)
	listed := map[int][]string{}
	for _, sec := range strings.Split(string(doc), "\n### ")[1:] {
		m := header.FindStringSubmatch(sec)
		if m == nil {
			continue
		}
		step, _ := strconv.Atoi(m[1])
		if i := strings.Index(sec, "\n## "); i >= 0 {
			sec = sec[:i]
		}
		for _, b := range bullet.FindAllStringSubmatch(sec, -1) {
			last := b[1]
			if b[2] != "" {
				last = b[2]
			}
			for c := b[1][0]; c <= last[0]; c++ {
				listed[step] = append(listed[step], string(c))
			}
		}
	}
	if len(listed[6]) == 0 {
		t.Fatalf("docs/lab.md's step 6 lists no part as a bullet (- **a** …); declared: %v", declared[6])
	}
	if len(declared[6]) == 0 {
		t.Fatalf("found no lettered harness.Part in runStep6")
	}
	for step, letters := range listed {
		slices.Sort(letters)
		want := slices.Clone(declared[step])
		slices.Sort(want)
		if !slices.Equal(letters, want) {
			t.Errorf("docs/lab.md lists step %d's parts %v; runStep%d declares %v", step, letters, step, want)
		}
	}
}

// declaredParts reads the steps' Go files in dir and returns, per step, the
// letters of the harness.Part literals in its runStepN function.
func declaredParts(t *testing.T, dir string) map[int][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil {
				continue
			}
			step, err := strconv.Atoi(strings.TrimPrefix(fd.Name.Name, "runStep"))
			if err != nil || !strings.HasPrefix(fd.Name.Name, "runStep") {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := cl.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Part" {
					return true
				}
				for _, e := range cl.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
						continue
					}
					lit, ok := kv.Value.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					name, err := strconv.Unquote(lit.Value)
					if err != nil {
						continue
					}
					if id := result.PartID(name, -1); id != "" {
						out[step] = append(out[step], id)
					}
				}
				return true
			})
		}
	}
	return out
}
