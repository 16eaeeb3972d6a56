// Package clauses is the registry of CONTRACT.md's rules: the clause ids the
// contract defines, the checks that name them (the h.Clause calls in the
// lab's source), the lab crash invariants that judge them, the mutants that
// break them, and the clauses not graded yet. Each of these is read from
// where it is written, so nothing is listed twice: a test compares them
// (TestClauseRegistry) and writes the table docs/clauses.md from them.
package clauses

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// idPattern is the syntax of a clause id: §N.word(.word)*.
const idPattern = `§[0-9]+(?:\.[a-z0-9-]+)+`

// ID matches exactly a clause id.
var ID = regexp.MustCompile(`^` + idPattern + `$`)

// definition is how the contract defines a clause: its id in square brackets
// at the end of the rule. The changelog cites ids in backquotes, which are
// references, not definitions.
var definition = regexp.MustCompile(`\[(` + idPattern + `)\]`)

// Clause is one rule of the contract.
type Clause struct {
	ID string
	// Text is the rule's words: what precedes the id, back to the previous
	// id or the start of its paragraph, list item or table cell, shortened.
	Text string
}

// Parse reads the clauses a contract defines, in the order it defines them.
// An id defined twice is an error: an id names one rule.
func Parse(contract []byte) ([]Clause, error) {
	s := string(contract)
	var out []Clause
	seen := map[string]bool{}
	prev := 0
	for _, m := range definition.FindAllStringSubmatchIndex(s, -1) {
		id := s[m[2]:m[3]]
		if seen[id] {
			return nil, fmt.Errorf("CONTRACT.md defines %s twice", id)
		}
		seen[id] = true
		text := ruleText(s[prev:m[0]])
		if row := s[strings.LastIndex(s[:m[0]], "\n")+1 : m[0]]; strings.HasPrefix(row, "|") {
			// A table row: the rule is its first cell's subject and the
			// words of this cell.
			cells := strings.Split(strings.ReplaceAll(row, `\|`, "\x00"), "|")
			first := strings.TrimSpace(cells[1])
			text = ruleText(strings.ReplaceAll(cells[len(cells)-1], "\x00", "|"))
			if first != "" && len(cells) > 2 {
				text = ruleText(strings.ReplaceAll(first, "\x00", "|") + ": " + text)
			}
		}
		out = append(out, Clause{ID: id, Text: text})
		prev = m[1]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CONTRACT.md defines no clause ([§N.word])")
	}
	return out, nil
}

// ruleText shortens the text before a definition to the rule it ends.
func ruleText(before string) string {
	for _, sep := range []string{"\n\n", "\n- ", "\n1. ", "\n2. "} {
		if i := strings.LastIndex(before, sep); i >= 0 {
			before = before[i+len(sep):]
		}
	}
	t := strings.Join(strings.Fields(before), " ")
	t = strings.TrimLeft(t, ".;:,)— ")
	t = strings.ReplaceAll(t, "**", "")
	t = strings.TrimRight(t, " ([")
	const max = 140
	if utf8.RuneCountInString(t) > max {
		r := []rune(t)
		t = strings.TrimSpace(string(r[:max])) + "…"
	}
	return t
}

// Site is a place in the lab's source that names clauses for the checks
// after it: an h.Clause call.
type Site struct {
	File  string // base name, e.g. step3_claim.go
	Func  string // the function it is in, e.g. claimSpent
	Line  int
	Steps []int // the lab steps whose run reaches Func (stepFuncs)
}

// fileStep is the step of a file named stepN_…go, or 0.
func fileStep(base string) int {
	rest, ok := strings.CutPrefix(base, "step")
	if !ok {
		return 0
	}
	i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return 0
	}
	n, _ := strconv.Atoi(rest[:i])
	return n
}

// Sites finds every call of a method named Clause in the Go files of dirs
// (tests left out), by clause id, each with the steps that reach it. The
// registry reads the ids from the source, so they are written there: as
// the call's string literals, or, for an argument that is not one (an id
// from a table of cases), as the string literals of its function, every one
// of which the call is taken to name.
func Sites(dirs ...string) (map[string][]Site, error) {
	out := map[string][]Site{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		var parsed []*ast.File
		var names []string
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				return nil, err
			}
			parsed, names = append(parsed, af), append(names, filepath.Base(f))
		}
		steps := stepFuncs(parsed, names)
		for i, af := range parsed {
			if err := fileSites(fset, af, names[i], steps, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// stepFuncs says which steps reach each function of a package: every
// function declared in stepN_….go belongs to step N, and so does every
// function of the package that one of step N's functions names (calls, or
// passes as a part to run), and so on. A part kept in a file of its own
// (labsteps/clauses_files.go) belongs to the steps whose files name it.
func stepFuncs(files []*ast.File, names []string) map[string][]int {
	refs := map[string][]string{} // function → the package's functions it names
	steps := map[string][]int{}
	declared := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				declared[fd.Name.Name] = true
			}
		}
	}
	var queue []string
	for i, f := range files {
		n := fileStep(names[i])
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(x ast.Node) bool {
				if id, ok := x.(*ast.Ident); ok && declared[id.Name] && id.Name != fd.Name.Name {
					refs[fd.Name.Name] = append(refs[fd.Name.Name], id.Name)
				}
				return true
			})
			if n > 0 && !slices.Contains(steps[fd.Name.Name], n) {
				steps[fd.Name.Name] = append(steps[fd.Name.Name], n)
				queue = append(queue, fd.Name.Name)
			}
		}
	}
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		for _, callee := range refs[fn] {
			grew := false
			for _, n := range steps[fn] {
				if !slices.Contains(steps[callee], n) {
					steps[callee] = append(steps[callee], n)
					grew = true
				}
			}
			if grew {
				queue = append(queue, callee)
			}
		}
	}
	for fn := range steps {
		sort.Ints(steps[fn])
	}
	return steps
}

// fileSites adds the sites of one parsed Go file to out.
func fileSites(fset *token.FileSet, f *ast.File, base string, steps map[string][]int, out map[string][]Site) error {
	var bad error
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Clause" {
				return true
			}
			pos := fset.Position(call.Pos())
			site := Site{File: base, Func: fd.Name.Name, Line: pos.Line, Steps: steps[fd.Name.Name]}
			for _, a := range call.Args {
				if id, ok := literalID(a); ok {
					out[id] = append(out[id], site)
					continue
				}
				if _, isLit := a.(*ast.BasicLit); isLit {
					bad = fmt.Errorf("%s: %s is not a clause id like \"§2.enqueue.dup\"", pos, exprText(fset, a))
					return false
				}
				// An id taken from a table: the ids the function writes
				// down are those it can name.
				ids := literalIDs(fd.Body)
				if len(ids) == 0 {
					bad = fmt.Errorf("%s: Clause(%s): no clause id is written as a string literal in %s, so the registry cannot tell which it names", pos, exprText(fset, a), fd.Name.Name)
					return false
				}
				for _, id := range ids {
					out[id] = append(out[id], site)
				}
			}
			return true
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// literalID is e's clause id when e is a string literal holding one.
func literalID(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	id, err := strconv.Unquote(lit.Value)
	return id, err == nil && ID.MatchString(id)
}

// literalIDs lists the clause ids written as string literals in body, each
// once, in order.
func literalIDs(body ast.Node) []string {
	var ids []string
	ast.Inspect(body, func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok {
			if id, ok := literalID(e); ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return true
	})
	return ids
}

// exprText prints an expression for a message.
func exprText(fset *token.FileSet, e ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, fset, e); err != nil {
		return fmt.Sprintf("%T", e)
	}
	return b.String()
}

// ParseUngraded reads the list of clauses not graded yet: one per line, the
// id and then why it is not graded (required); blank lines and lines
// starting with # are skipped.
func ParseUngraded(b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, " ")
		why = strings.TrimSpace(why)
		switch {
		case !ID.MatchString(id):
			return nil, fmt.Errorf("ungraded line %d: %q is not a clause id", n, id)
		case why == "":
			return nil, fmt.Errorf("ungraded line %d: %s says not why it is not graded", n, id)
		case out[id] != "":
			return nil, fmt.Errorf("ungraded line %d: %s listed twice", n, id)
		}
		out[id] = why
	}
	return out, sc.Err()
}

// ReadUngraded is ParseUngraded of a file.
func ReadUngraded(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseUngraded(b)
}

// sortedKeys lists a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
