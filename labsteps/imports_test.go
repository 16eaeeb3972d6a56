package labsteps_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The lab judges black-box and its judge must carry no solution, so no
// package under labsteps/ imports snacklab's own implementation or its
// internal packages: internal/* imports labsteps/*, never the reverse. The
// results and their writers are leaves that graders and a judge read
// without the harness. Build files only: a test may use a test helper.
func TestImportsPointDown(t *testing.T) {
	forbidden := []string{"snacklab/internal", "snacklab/queue", "snacklab/sender", "snacklab/receiver", "snacklab/cmd"}
	// allowed lists, for a package, the only snacklab packages it may
	// import (none when empty); a package not listed may import any labsteps
	// package.
	allowed := map[string][]string{
		"snacklab/labsteps/result": {},
		// The report quotes the contract's changelog: the contract's text
		// (the root package) and its registry are leaves too.
		"snacklab/labsteps/report":   {"snacklab/labsteps/result", "snacklab/labsteps/fresh", "snacklab/labsteps/clauses", "snacklab"},
		"snacklab/labsteps/clauses":  {},
		"snacklab/labsteps/fresh":    {},
		"snacklab/labsteps/systrace": {},
	}
	imports := map[string]map[string]bool{} // package → snacklab imports
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := path.Join("snacklab/labsteps", filepath.ToSlash(filepath.Dir(p)))
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if imp == "snacklab" || strings.HasPrefix(imp, "snacklab/") {
				imports[pkg][imp] = true
			}
			for _, bad := range forbidden {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					t.Errorf("%s imports %s: the lab must not import what it judges, nor internal/*", p, imp)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"snacklab/labsteps", "snacklab/labsteps/harness", "snacklab/labsteps/result", "snacklab/labsteps/report"} {
		if imports[want] == nil {
			t.Errorf("no package %s found: the layout this test guards has moved", want)
		}
	}
	for pkg, may := range allowed {
		for imp := range imports[pkg] {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s; it may import only %v of snacklab's packages", pkg, imp, may)
			}
		}
	}
	var names []string
	for pkg := range imports {
		names = append(names, pkg)
	}
	sort.Strings(names)
	t.Logf("checked %v", names)
}
