package labsteps_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The steps wait only through the harness (Await, Until, WaitLine, Wait,
// WaitRequest, WaitHeld, WaitRefused, HTTP …), whose waits end as TIMEOUT
// when they run out (harness.TestEveryWaitRunsOutAsTimeout): a step that
// kept its own deadline, timer or poll could end its wait in a failed check,
// and a slow machine would fail a correct program (issue #33). So no step
// file calls a timer, a sleep or a context deadline, and no loop of one
// reads the clock. allowed lists the exceptions, each with its reason.
func TestStepsWaitOnlyThroughTheHarness(t *testing.T) {
	t.Parallel()
	allowed := map[string]string{
		// The step's time limit, which the runner turns into TIMEOUT.
		"runner.go context.WithTimeout": "the step's own limit",
		// A client that stalls is the probe itself, not a wait.
		"clauses_receiver.go time.Sleep": "the probe's stall (clientStall)",
	}
	forbidden := map[string]bool{
		"time.After": true, "time.AfterFunc": true, "time.NewTimer": true, "time.NewTicker": true, "time.Tick": true,
		"time.Sleep": true, "context.WithTimeout": true, "context.WithDeadline": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				call := selector(n.Fun)
				if forbidden[call] && allowed[name+" "+call] == "" {
					t.Errorf("%s: %s in a step file: wait through the harness (Await, Until), whose waits end as TIMEOUT", fset.Position(n.Pos()), call)
				}
			case *ast.ForStmt:
				if n.Cond != nil && readsClock(n.Cond) {
					t.Errorf("%s: a loop that polls the clock in a step file: wait through the harness (Await, Until)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if seen < 10 {
		t.Fatalf("read %d step files; want the package's own (is the test run from labsteps/?)", seen)
	}
}

// selector is "pkg.Name" for a call of a package's function, "" otherwise.
func selector(e ast.Expr) string {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := s.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return id.Name + "." + s.Sel.Name
}

// readsClock reports whether e calls time.Now or time.Since.
func readsClock(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if s := selector(c.Fun); s == "time.Now" || s == "time.Since" || s == "time.Until" {
				found = true
			}
		}
		return !found
	})
	return found
}
