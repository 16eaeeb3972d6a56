package starter_test

import (
	"bytes"
	"errors"
	"go/format"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"snacklab/internal/starter"
	"snacklab/labsteps/mutants"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// The parts a learner writes are marked, each in the function it belongs to.
func TestTheReferenceIsMarked(t *testing.T) {
	regions, err := starter.ScanModule(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range regions {
		got = append(got, r.File+" "+r.Func+" "+r.Name)
		if r.Lines() < 1 {
			t.Errorf("%s:%d: region %s hides no line", r.File, r.Begin, r.Name)
		}
		if !strings.Contains(strings.Join(r.Starter, "\n"), "ErrNotImplemented") {
			t.Errorf("%s:%d: region %s: its STARTER code must fail with ErrNotImplemented, so the lab says what is missing", r.File, r.Begin, r.Name)
		}
	}
	want := []string{
		"queue/batch.go (*Queue).ClaimBatch claim-batch",
		"queue/batch.go (*Queue).FinishBatch finish-batch",
		"queue/queue.go Backoff backoff",
		"queue/queue.go (*Queue).Enqueue enqueue",
		"queue/queue.go (*Queue).Claim claim",
		"queue/queue.go (*Queue).Finish finish",
		"queue/queue.go (*Queue).Redrive redrive",
		"receiver/receiver.go (*Receiver).record apply",
		"sender/batch.go (*Sender).RunBatch run-batch",
		"sender/sender.go Classify classify",
		"sender/sender.go (*Sender).RunOnce run-once",
	}
	if !slices.Equal(got, want) {
		t.Errorf("regions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Stripping the markers leaves exactly the same program: the same tokens, in
// the same order, comments aside; and a file gofmt leaves alone. So the
// reference the lab passes (labsteps' tests, `lab selftest`) is the reference
// without markers.
func TestStripChangesNoToken(t *testing.T) {
	root := moduleRoot(t)
	regions, err := starter.ScanModule(root)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, r := range regions {
		files[r.File] = true
	}
	for f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		out, err := starter.Strip(f, src)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := tokens(t, f, src), tokens(t, f, out); !slices.Equal(a, b) {
			t.Errorf("%s: stripping the markers changed the program (%d tokens before, %d after)", f, len(a), len(b))
		}
		if formatted, err := format.Source(out); err != nil || !bytes.Equal(formatted, out) {
			t.Errorf("%s: the stripped file is not gofmt'd (err %v)", f, err)
		}
		for _, m := range []string{"BEGIN SOLUTION", "END SOLUTION", "STARTER:"} {
			if bytes.Contains(out, []byte(m)) {
				t.Errorf("%s: %q left after Strip", f, m)
			}
		}
		if got := strings.Count(string(src), "\n") - strings.Count(string(out), "\n"); got <= 0 {
			t.Errorf("%s: Strip removed %d lines", f, got)
		}
	}
}

// tokens lists a file's tokens without its comments (go/scanner's automatic
// semicolons included, so line structure that matters to Go counts too).
func tokens(t *testing.T, name string, src []byte) []string {
	t.Helper()
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile(name, -1, len(src)), src, func(pos token.Position, msg string) { t.Errorf("%s: %s", pos, msg) }, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		out = append(out, tok.String()+" "+lit)
	}
}

// Every malformed marker is refused with its file and line.
func TestScanRefusesMalformedMarkers(t *testing.T) {
	const head = "package p\n\nfunc f() error {\n"
	for _, tc := range []struct {
		name, body string
		line       int
	}{
		{"no end", "\t// BEGIN SOLUTION a: do it\n\treturn nil\n}\n", 4},
		{"end without begin", "\treturn nil\n\t// END SOLUTION a\n\t// STARTER: return nil\n}\n", 5},
		{"names differ", "\t// BEGIN SOLUTION a: do it\n\treturn nil\n\t// END SOLUTION b\n\t// STARTER: return nil\n}\n", 6},
		{"nested", "\t// BEGIN SOLUTION a: do it\n\t// BEGIN SOLUTION b: and this\n\treturn nil\n\t// END SOLUTION b\n\t// STARTER: return nil\n\t// END SOLUTION a\n\t// STARTER: return nil\n}\n", 5},
		{"no starter", "\t// BEGIN SOLUTION a: do it\n\treturn nil\n\t// END SOLUTION a\n}\n", 6},
		{"empty starter", "\t// BEGIN SOLUTION a: do it\n\treturn nil\n\t// END SOLUTION a\n\t// STARTER:\n}\n", 6},
		{"stray starter", "\t// STARTER: return nil\n\treturn nil\n}\n", 4},
		{"starter after a gap", "\t// BEGIN SOLUTION a: do it\n\treturn nil\n\t// END SOLUTION a\n\n\t// STARTER: return nil\n}\n", 6},
		{"no task", "\t// BEGIN SOLUTION a\n\treturn nil\n\t// END SOLUTION a\n\t// STARTER: return nil\n}\n", 4},
		{"bad name", "\t// BEGIN SOLUTION Big_Name: do it\n\treturn nil\n\t// END SOLUTION Big_Name\n\t// STARTER: return nil\n}\n", 4},
		{"typo", "\t//BEGIN SOLUTION a: do it\n\treturn nil\n}\n", 4},
		{"lower case", "\t// end solution a\n\treturn nil\n}\n", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := starter.Scan("p.go", []byte(head+tc.body))
			var me *starter.MarkerError
			if !errors.As(err, &me) {
				t.Fatalf("Scan: err %v, want a MarkerError", err)
			}
			if me.File != "p.go" || me.Line != tc.line {
				t.Errorf("Scan: %v, want it at p.go:%d", err, tc.line)
			}
		})
	}
	// A region must sit inside one function body: its STARTER lines are statements.
	_, err := starter.Scan("p.go", []byte("package p\n\n// BEGIN SOLUTION a: do it\nvar x = 1\n\n// END SOLUTION a\n// STARTER: var x = 2\n"))
	if err == nil || !strings.Contains(err.Error(), "not inside one function body") {
		t.Errorf("a region outside a function: err %v", err)
	}
}

// The learner's version of a file: a TODO and the STARTER code in place of
// the region, the imports only the solution used dropped, gofmt'd.
func TestTransform(t *testing.T) {
	src := strings.Join([]string{
		"package p",
		"",
		"import (",
		"\t\"errors\"",
		"\t\"fmt\"",
		"\t\"hash/fnv\"",
		"\tsq \"strconv\"",
		"\t_ \"embed\"",
		")",
		"",
		"var ErrNotImplemented = errors.New(\"not implemented\")",
		"",
		"// Sum is documented.",
		"func Sum(s string) (uint64, error) {",
		"\tif s == \"\" {",
		"\t\treturn 0, fmt.Errorf(\"empty\")",
		"\t}",
		"\t// BEGIN SOLUTION sum: hash it (see the contract)",
		"\th := fnv.New64a()",
		"\th.Write([]byte(s + sq.Itoa(1)))",
		"\treturn h.Sum64(), nil",
		"\t// END SOLUTION sum",
		"\t// STARTER: if true {",
		"\t// STARTER: return 0, fmt.Errorf(\"sum: %w (p.go: Sum)\", ErrNotImplemented)",
		"\t// STARTER: }",
		"\t// STARTER: return 0, nil",
		"}",
		"",
	}, "\n")
	want := strings.Join([]string{
		"package p",
		"",
		"import (",
		"\t_ \"embed\"",
		"\t\"errors\"",
		"\t\"fmt\"",
		")",
		"",
		"var ErrNotImplemented = errors.New(\"not implemented\")",
		"",
		"// Sum is documented.",
		"func Sum(s string) (uint64, error) {",
		"\tif s == \"\" {",
		"\t\treturn 0, fmt.Errorf(\"empty\")",
		"\t}",
		"\t// TODO(sum): hash it (see the contract)",
		"\tif true {",
		"\t\treturn 0, fmt.Errorf(\"sum: %w (p.go: Sum)\", ErrNotImplemented)",
		"\t}",
		"\treturn 0, nil",
		"}",
		"",
	}, "\n")
	got, err := starter.Transform("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Transform:\n%s\nwant:\n%s", got, want)
	}
	stripped, err := starter.Strip("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stripped), "SOLUTION") || strings.Contains(string(stripped), "STARTER") ||
		!strings.Contains(string(stripped), "\th := fnv.New64a()\n") || strings.Count(string(stripped), "\n") != strings.Count(src, "\n")-6 {
		t.Errorf("Strip:\n%s", stripped)
	}
	// A file without regions is left as it is.
	plain := []byte("package p\n\nimport \"fmt\"\n\nfunc F() { fmt.Println() }\n")
	if got, err := starter.Transform("q.go", plain); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Transform of a file without regions: %q, %v", got, err)
	}
	// A STARTER line that is not Go is reported, not written.
	bad := strings.Replace(src, "// STARTER: return 0, nil", "// STARTER: return 0,, nil", 1)
	if _, err := starter.Transform("p.go", []byte(bad)); err == nil || !strings.Contains(err.Error(), "STARTER") {
		t.Errorf("Transform of a broken STARTER line: err %v", err)
	}
}

// Region names are unique across the module.
func TestScanModuleRefusesDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	region := "\t// BEGIN SOLUTION same: do it\n\treturn\n\t// END SOLUTION same\n\t// STARTER: return\n"
	for _, f := range []string{"a/a.go", "b/b.go"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n\nfunc F() {\n"+region+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module snacklab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := starter.ScanModule(dir)
	if err == nil || !strings.Contains(err.Error(), "region name same is already used at a/a.go:4") {
		t.Errorf("ScanModule: err %v", err)
	}
	if _, err := starter.Plan(t.TempDir()); !errors.Is(err, starter.ErrNoMarkers) {
		t.Errorf("Plan of a module without markers: err %v, want ErrNoMarkers", err)
	}
}
