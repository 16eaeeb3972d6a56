package grade_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/internal/grade"
)

// CheckSource follows assembler includes as cmd/asm resolves them (from the
// package directory, files of any name, any depth) and refuses any that
// does not end at a regular file of the submission or a toolchain header.
func TestCheckSourceIncludes(t *testing.T) {
	const s = "cmd/queuectl/x_amd64.s"
	for _, tc := range []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string) // after files
		want  string                         // "" for accepted
	}{
		{name: "toolchain headers", files: map[string]string{s: "#include \"textflag.h\"\n#include \"funcdata.h\"\n#include \"go_asm.h\"\n#include \"asm_amd64.h\"\n"}},
		{name: "own header of any name, nested", files: map[string]string{
			s:                         "#include \"x.inc\"\n",
			"cmd/queuectl/x.inc":      "// a header\n#include \"sub/y.txt\"\n",
			"cmd/queuectl/sub/y.txt":  "#include \"textflag.h\"\n",
			"cmd/queuectl/unused.inc": "#include \"/etc/passwd\"\n", // not included by any .s
		}},
		{name: "diamond", files: map[string]string{
			s: "#include \"a.h\"\n#include \"b.h\"\n", "cmd/queuectl/a.h": "#include \"c.h\"\n",
			"cmd/queuectl/b.h": "#include \"c.h\"\n", "cmd/queuectl/c.h": "\n",
		}},
		{name: "inside via .. staying in the tree", files: map[string]string{
			s: "#include \"../common/h.inc\"\n", "cmd/common/h.inc": "\n",
		}},
		{name: "commented out", files: map[string]string{s: "// #include \"/etc/passwd\"\n/* #include \"/dev/zero\" */\n"}},
		{name: "absolute", files: map[string]string{s: "#include \"textflag.h\"\n#include \"/etc/passwd\"\n"},
			want: s + ":2 includes /etc/passwd, a file outside your submission"},
		{name: "absolute through a .inc", files: map[string]string{s: "#include \"x.inc\"\n", "cmd/queuectl/x.inc": "\n\n#include \"/etc/hostname\"\n"},
			want: "cmd/queuectl/x.inc:3 (included from " + s + ":1) includes /etc/hostname, a file outside your submission"},
		{name: "nested name resolved from the package dir, not the header's", files: map[string]string{
			s: "#include \"sub/a.h\"\n", "cmd/queuectl/sub/a.h": "#include \"b.h\"\n", "cmd/queuectl/sub/b.h": "\n",
		}, want: "cmd/queuectl/sub/a.h:1 (included from " + s + ":1) includes b.h, which is not a file of your submission"},
		{name: "escaped quotes unquoted", files: map[string]string{s: "#include \"\\x2fetc\\x2fpasswd\"\n"},
			want: "includes /etc/passwd, a file outside your submission"},
		{name: ".. climbing out", files: map[string]string{s: "#include \"../../../other/queue.h\"\n"},
			want: s + ":1 includes ../../../other/queue.h, a file outside your submission"},
		{name: "angle brackets", files: map[string]string{s: "#  include <../../other/queue.h>\n"},
			want: s + ":1 includes <, which is not a file name in double quotes"},
		{name: "name from a macro", files: map[string]string{s: "#define F \"/etc/passwd\"\n#include F\n"},
			want: s + ":2 includes F, which is not a file name in double quotes"},
		{name: "hash from a macro", files: map[string]string{s: "#define H #\nH include \"/etc/passwd\"\n"},
			want: s + ":2 includes /etc/passwd, a file outside your submission"},
		{name: "comment before the hash", files: map[string]string{s: "/* c */ #include \"/proc/self/fd/0\"\n"},
			want: "includes /proc/self/fd/0, a file outside your submission"},
		{name: "work dir file", files: map[string]string{s: "#include \"importcfg\"\n"},
			want: "includes importcfg, which is not a file of your submission"},
		{name: "cycle", files: map[string]string{s: "#include \"a.inc\"\n", "cmd/queuectl/a.inc": "#include \"b.inc\"\n", "cmd/queuectl/b.inc": "#include \"a.inc\"\n"},
			want: "cmd/queuectl/b.inc:1 (included from cmd/queuectl/a.inc:1 (included from " + s + ":1)) includes a.inc, which includes cmd/queuectl/b.inc again (an include cycle)"},
		{name: "includes itself", files: map[string]string{s: "#include \"x_amd64.s\"\n"},
			want: "includes x_amd64.s, which includes " + s + " again"},
		{name: "a directory", files: map[string]string{s: "#include \"sub\"\n", "cmd/queuectl/sub/a": ""},
			want: "includes sub, which is not a regular file"},
		{name: "FIFO", files: map[string]string{s: "#include \"pipe.h\"\n"}, setup: func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "cmd/queuectl/pipe.h"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "pipe.h is not a regular file"}, // the walk refuses it first; no hang either way
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n", "cmd/queuectl/main.go": "package main\n\nfunc main() {}\n"})
			writeFiles(t, dir, tc.files)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			err := grade.CheckSource(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckSource: got %v, want it accepted", err)
			case tc.want != "" && (err == nil || !errors.Is(err, grade.ErrSource) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckSource:\n got %v\nwant ErrSource saying %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), dir):
				t.Errorf("CheckSource: %v names the grading machine's path %s", err, dir)
			}
		})
	}
}

// An include climbing above the module root is refused even when what it
// names exists there (here through a link the walk never sees).
func TestCheckSourceIncludeAboveRoot(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "sub")
	writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n",
		"p/x_amd64.s": "#include \"../../link/passwd\"\n"})
	if err := os.Symlink("/etc", filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	err := grade.CheckSource(dir)
	if err == nil || !strings.Contains(err.Error(), "a file outside your submission") {
		t.Errorf("CheckSource: got %v, want the include refused as outside", err)
	}
}
