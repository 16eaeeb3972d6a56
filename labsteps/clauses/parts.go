package clauses

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// harmless are the harness methods a step or part may call before its
// first Clause: they make no check of their own (Parallel runs parts, each
// of which names its clauses first).
var harmless = map[string]bool{"Clause": true, "Parallel": true, "RequireStrace": true, "Section": true, "Narrate": true, "UseQueue": true}

// UnnamedParts reads the Go files of the steps' package in dir and lists
// every step or part (a function given as `run:` of a Step or `Run:` of a
// harness.Part) whose first use of its harness is not h.Clause: the checks
// it makes before any Clause would name no clause, since a part starts with
// none. A use that passes the harness to a function of the package is
// followed into that function.
func UnnamedParts(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	var roots []ast.Expr
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
				funcs[fd.Name.Name] = fd
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "Run" || k.Name == "run") {
					roots = append(roots, kv.Value)
				}
			}
			return true
		})
	}
	var out []string
	for _, r := range roots {
		var ft *ast.FuncType
		var body *ast.BlockStmt
		switch v := r.(type) {
		case *ast.Ident:
			fd := funcs[v.Name]
			if fd == nil {
				continue
			}
			ft, body = fd.Type, fd.Body
		case *ast.FuncLit:
			ft, body = v.Type, v.Body
		default:
			continue
		}
		if len(ft.Params.List) == 0 || len(ft.Params.List[0].Names) == 0 {
			continue
		}
		if bad := firstUse(funcs, body, ft.Params.List[0].Names[0].Name, 0); bad != "" {
			out = append(out, fmt.Sprintf("%s: %s", fset.Position(r.Pos()), bad))
		}
	}
	return out, nil
}

// firstUse follows body to the first use of the harness h: "" when it is
// h.Clause, else what it is.
func firstUse(funcs map[string]*ast.FuncDecl, body *ast.BlockStmt, h string, depth int) string {
	for _, st := range body.List {
		if !mentions(st, h) {
			continue
		}
		call := stmtCall(st)
		if call == nil {
			return fmt.Sprintf("uses %s before naming a clause (h.Clause first)", h)
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == h {
				if sel.Sel.Name == "Clause" {
					return ""
				}
				if harmless[sel.Sel.Name] {
					continue
				}
				return fmt.Sprintf("calls %s.%s before naming a clause (h.Clause first)", h, sel.Sel.Name)
			}
		}
		if id, ok := call.Fun.(*ast.Ident); ok && funcs[id.Name] != nil && depth < 8 {
			fd := funcs[id.Name]
			for i, a := range call.Args {
				if x, ok := a.(*ast.Ident); ok && x.Name == h && i < len(fd.Type.Params.List) && len(fd.Type.Params.List[i].Names) > 0 {
					if bad := firstUse(funcs, fd.Body, fd.Type.Params.List[i].Names[0].Name, depth+1); bad != "" {
						return id.Name + " " + bad
					}
					return ""
				}
			}
		}
		return fmt.Sprintf("uses %s before naming a clause (h.Clause first)", h)
	}
	return ""
}

// stmtCall is the call a statement makes, if it is one call (alone or
// assigned).
func stmtCall(st ast.Stmt) *ast.CallExpr {
	switch s := st.(type) {
	case *ast.ExprStmt:
		c, _ := s.X.(*ast.CallExpr)
		return c
	case *ast.AssignStmt:
		if len(s.Rhs) == 1 {
			c, _ := s.Rhs[0].(*ast.CallExpr)
			return c
		}
	}
	return nil
}

// mentions reports whether n names the identifier h.
func mentions(n ast.Node, h string) bool {
	found := false
	ast.Inspect(n, func(x ast.Node) bool {
		if id, ok := x.(*ast.Ident); ok && id.Name == h {
			found = true
		}
		return !found
	})
	return found
}
