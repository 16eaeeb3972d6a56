// Package starter makes a learner's copy of snacklab from the reference and
// proves the two, and the lab, agree.
//
// The parts a learner writes are marked in the reference's Go source. A
// marked region is a run of whole lines between two marker comments, and is
// followed by the code the learner's copy has instead:
//
//	func (q *Queue) Claim(…) (job Job, ok bool, err error) {
//		…checks the learner keeps…
//		// BEGIN SOLUTION claim: one line saying what to write (CONTRACT.md §2 claim)
//		…the reference's code…
//		// END SOLUTION claim
//		// STARTER: return Job{}, false, fmt.Errorf("claim: %w (queue/queue.go: Claim)", ErrNotImplemented)
//	}
//
// The rules, checked by Scan:
//   - each marker is a line of its own: `// BEGIN SOLUTION NAME: TASK`,
//     `// END SOLUTION NAME` with the same NAME, then one or more
//     `// STARTER: CODE` lines right after it (NAME is lower-case letters,
//     digits and dashes, unique in the module; TASK is not empty);
//   - regions do not nest, and every BEGIN has its END in the same file;
//   - a STARTER line anywhere else, or a line that looks like a marker but
//     does not follow this form, is an error.
//
// The reference is the file as it is: markers are comments, so Strip, which
// deletes the marker lines and nothing else, leaves the same program (a test
// compares the two token by token). The learner's copy (Transform) has, in
// place of each region and its STARTER lines, a `// TODO(NAME): TASK` line
// and the STARTER code at the region's indentation; imports that only the
// solution used are dropped and the file is gofmt'd. The STARTER code
// returns an error wrapping ErrNotImplemented that names the file and the
// function (or panics with one where the function returns no error), so a
// lab step run against the copy fails saying what is missing.
package starter

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Region is one marked part of the reference.
type Region struct {
	File    string   // slash path relative to the module root
	Name    string   // unique in the module
	Task    string   // what the learner writes, one line
	Begin   int      // line of the BEGIN marker, 1-based
	End     int      // line of the END marker
	Last    int      // line of the last STARTER line
	Indent  string   // the BEGIN marker's indentation
	Starter []string // the learner's code, one entry per STARTER line
	Func    string   // the function the region is in, e.g. "Claim" or "(*Queue).Claim"
}

// Lines is the number of reference lines the region hides.
func (r Region) Lines() int { return r.End - r.Begin - 1 }

const (
	beginPrefix   = "// BEGIN SOLUTION"
	endPrefix     = "// END SOLUTION"
	starterPrefix = "// STARTER:"
)

var (
	beginRE = regexp.MustCompile(`^// BEGIN SOLUTION ([a-z0-9][a-z0-9-]*): (\S.*)$`)
	endRE   = regexp.MustCompile(`^// END SOLUTION ([a-z0-9][a-z0-9-]*)$`)
	// looksLikeMarker catches typos such as "//BEGIN SOLUTION" or "// End solution".
	looksLikeMarker = regexp.MustCompile(`(?i)^//\s*(BEGIN\s+SOLUTION|END\s+SOLUTION|STARTER\s*:)`)
)

// MarkerError is a malformed marker, with where it is.
type MarkerError struct {
	File string
	Line int
	Msg  string
}

func (e *MarkerError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Scan finds the regions of one file. file is only used in messages and in
// the regions it returns.
func Scan(file string, src []byte) ([]Region, error) {
	lines := strings.Split(string(src), "\n")
	var out []Region
	var open *Region
	bad := func(i int, format string, args ...any) error {
		return &MarkerError{File: file, Line: i + 1, Msg: fmt.Sprintf(format, args...)}
	}
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(t, beginPrefix):
			m := beginRE.FindStringSubmatch(t)
			if m == nil {
				return nil, bad(i, "malformed marker %q: want `// BEGIN SOLUTION name: what the learner writes`", t)
			}
			if open != nil {
				return nil, bad(i, "BEGIN SOLUTION %s inside region %s (opened on line %d): regions do not nest", m[1], open.Name, open.Begin)
			}
			open = &Region{File: file, Name: m[1], Task: strings.TrimSpace(m[2]), Begin: i + 1,
				Indent: lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]}
		case strings.HasPrefix(t, endPrefix):
			m := endRE.FindStringSubmatch(t)
			if m == nil {
				return nil, bad(i, "malformed marker %q: want `// END SOLUTION name`", t)
			}
			if open == nil {
				return nil, bad(i, "END SOLUTION %s without a BEGIN SOLUTION", m[1])
			}
			if m[1] != open.Name {
				return nil, bad(i, "END SOLUTION %s closes region %s (opened on line %d)", m[1], open.Name, open.Begin)
			}
			open.End = i + 1
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), starterPrefix) {
				i++
				code := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), starterPrefix))
				open.Starter = append(open.Starter, code)
			}
			open.Last = i + 1
			if strings.TrimSpace(strings.Join(open.Starter, "")) == "" {
				return nil, bad(open.End-1, "region %s has no `// STARTER: code` line right after its END: the learner's copy needs code that compiles and says what is missing", open.Name)
			}
			out = append(out, *open)
			open = nil
		case strings.HasPrefix(t, starterPrefix):
			return nil, bad(i, "STARTER line not right after an END SOLUTION marker")
		case looksLikeMarker.MatchString(t):
			return nil, bad(i, "malformed marker %q: markers are exactly `// BEGIN SOLUTION name: task`, `// END SOLUTION name` and `// STARTER: code`", t)
		}
	}
	if open != nil {
		return nil, bad(open.Begin-1, "BEGIN SOLUTION %s has no END SOLUTION", open.Name)
	}
	if len(out) > 0 {
		if err := attachFuncs(file, src, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// attachFuncs names the function each region is in, and refuses a region
// that is not inside one function body: a STARTER line must be a statement.
func attachFuncs(file string, src []byte, regions []Region) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for i := range regions {
		r := &regions[i]
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lo, hi := fset.Position(fd.Body.Lbrace).Line, fset.Position(fd.Body.Rbrace).Line
			if r.Begin > lo && r.Last < hi {
				r.Func = fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					r.Func = "(" + exprString(fd.Recv.List[0].Type) + ")." + r.Func
				}
			}
		}
		if r.Func == "" {
			return &MarkerError{File: file, Line: r.Begin, Msg: fmt.Sprintf("region %s is not inside one function body", r.Name)}
		}
	}
	return nil
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// Strip deletes the marker lines (BEGIN, END and STARTER) and nothing else:
// what is left is the reference exactly as it was before it was marked.
func Strip(file string, src []byte) ([]byte, error) {
	regions, err := Scan(file, src)
	if err != nil {
		return nil, err
	}
	drop := map[int]bool{}
	for _, r := range regions {
		drop[r.Begin] = true
		for l := r.End; l <= r.Last; l++ {
			drop[l] = true
		}
	}
	lines := strings.SplitAfter(string(src), "\n")
	var b bytes.Buffer
	for i, l := range lines {
		if !drop[i+1] {
			b.WriteString(l)
		}
	}
	return b.Bytes(), nil
}

// Transform is the learner's version of a file: each region and its STARTER
// lines become a TODO line and the STARTER code; imports nothing uses any
// more are removed; the result is gofmt'd. A file without regions comes back
// unchanged.
func Transform(file string, src []byte) ([]byte, error) {
	regions, err := Scan(file, src)
	if err != nil || len(regions) == 0 {
		return src, err
	}
	lines := strings.SplitAfter(string(src), "\n")
	var b bytes.Buffer
	next := 0
	for _, r := range regions {
		for _, l := range lines[next : r.Begin-1] {
			b.WriteString(l)
		}
		fmt.Fprintf(&b, "%s// TODO(%s): %s\n", r.Indent, r.Name, r.Task)
		for _, code := range r.Starter {
			fmt.Fprintf(&b, "%s%s\n", r.Indent, code)
		}
		next = r.Last
	}
	for _, l := range lines[next:] {
		b.WriteString(l)
	}
	out, err := pruneImports(file, b.Bytes())
	if err != nil {
		return nil, err
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("%s: the learner's version does not parse (check the STARTER lines): %w", file, err)
	}
	return formatted, nil
}

// pruneImports deletes the lines of imports no identifier refers to any more.
func pruneImports(file string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("%s: the learner's version does not parse (check the STARTER lines): %w", file, err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			// Obj is nil exactly for names declared outside the file: package names.
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil {
				used[id.Name] = true
			}
		}
		return true
	})
	drop := map[int]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			if name := importName(is); used[name] || name == "_" || name == "." {
				continue
			}
			from, to := fset.Position(is.Pos()).Line, fset.Position(is.End()).Line
			if !gd.Lparen.IsValid() {
				from, to = fset.Position(gd.Pos()).Line, fset.Position(gd.End()).Line
			}
			for l := from; l <= to; l++ {
				drop[l] = true
			}
		}
	}
	if len(drop) == 0 {
		return src, nil
	}
	lines := strings.SplitAfter(string(src), "\n")
	var b bytes.Buffer
	for i, l := range lines {
		if !drop[i+1] {
			b.WriteString(l)
		}
	}
	return b.Bytes(), nil
}

// importName is the name a file uses for an import: the explicit one, or
// the last element of the path that is not a major version. Blank and dot
// imports count as used.
func importName(is *ast.ImportSpec) string {
	p, _ := strconv.Unquote(is.Path.Value)
	if is.Name != nil {
		return is.Name.Name
	}
	base := path.Base(p)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		base = path.Base(path.Dir(p))
	}
	return strings.TrimPrefix(base, "go-")
}

// sortRegions orders regions by file, then line.
func sortRegions(rs []Region) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].File != rs[j].File {
			return rs[i].File < rs[j].File
		}
		return rs[i].Begin < rs[j].Begin
	})
}
