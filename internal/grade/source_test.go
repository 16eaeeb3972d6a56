package grade_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/internal/grade"
)

// CheckSource refuses, with the file and the reason, whatever would let a
// build read outside the submission or hang, and passes a plain module.
func TestCheckSource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // "" for accepted
	}{
		{"plain module", func(t *testing.T, dir string) {}, ""},
		{"replace inside", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n\nreplace example.com/x => ./third_party/x\n",
				"third_party/x/go.mod": "module example.com/x\n"})
		}, ""},
		{"replace inside, missing", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n\nreplace example.com/x => ./third_party/y\n"})
		}, "go.mod:5 replaces a module with ./third_party/y, which is not a directory of your submission"},
		{"replace with // inside the path", func(t *testing.T, dir string) {
			os.MkdirAll(filepath.Join(dir, "x"), 0o755)
			os.MkdirAll(filepath.Join(filepath.Dir(dir), "classmate"), 0o755)
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n\nreplace snacklab => \"./x//../../classmate\"\n"})
		}, "go.mod:5 replaces a module with ./x//../../classmate, a directory outside your submission"},
		{"replace into a dir linked outside", func(t *testing.T, dir string) {
			// The walk refuses the link itself first.
			os.Symlink("..", filepath.Join(dir, "up"))
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n\nreplace snacklab => ./up\n"})
		}, "up is a symbolic link"},
		{"asm include of an absolute path", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"cmd/queuectl/x_amd64.s": "#include \"textflag.h\"\n#include \"/etc/passwd\"\n"})
		}, "cmd/queuectl/x_amd64.s:2 includes /etc/passwd, a file outside your submission"},
		{"asm include climbing out", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"cmd/queuectl/x_amd64.s": "#  include <../../../../other/queue.h>\n"})
		}, "x_amd64.s:1 includes <, which is not a file name in double quotes"},
		{"asm include of the toolchain and own headers", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"cmd/queuectl/x_amd64.s": "#include \"textflag.h\"\n#include \"own.h\"\n", "cmd/queuectl/own.h": "// nothing\n"})
		}, ""},
		{"replace by module path", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\nreplace (\n\texample.com/x v1.0.0 => example.com/y v1.2.0\n)\n"})
		}, ""},
		{"replace outside", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\nreplace snacklab => ../other\n"})
		}, "go.mod:3 replaces a module with ../other, a directory outside your submission"},
		{"replace outside in a block", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\nreplace (\n\tsnacklab => /home/someone/snacklab // theirs\n)\n"})
		}, "replaces a module with /home/someone/snacklab"},
		{"replace escaping through ./..", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\nreplace x => ./a/../../b\n"})
		}, "a directory outside your submission"},
		{"package dir linked", func(t *testing.T, dir string) {
			os.Symlink("../other/queue", filepath.Join(dir, "queue"))
		}, "queue is a symbolic link"},
		{"go file linked", func(t *testing.T, dir string) {
			os.Symlink("/etc/hostname", filepath.Join(dir, "cmd", "queuectl", "x.go"))
		}, "cmd/queuectl/x.go is a symbolic link"},
		{"go.mod a FIFO", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "go.mod"))
			if err := syscall.Mkfifo(filepath.Join(dir, "go.mod"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "go.mod is not a regular file"},
		{"escape codes in a name", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"cmd/queuectl/\x1b[2Kx.go": "package main\n"})
		}, `a file name holds control or invisible characters ("cmd/queuectl/\x1b[2Kx.go")`},
		{"bidi override in a name", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"cmd/queuectl/a\u202eog.txt": ""})
		}, "a file name holds control or invisible characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"go.mod": "module m\n\ngo 1.26\n", "cmd/queuectl/main.go": "package main\n\nfunc main() {}\n"})
			tc.setup(t, dir)
			err := grade.CheckSource(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckSource: %v, want it accepted", err)
			case tc.want != "" && (err == nil || !errors.Is(err, grade.ErrSource) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckSource: %v, want ErrSource saying %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), dir):
				t.Errorf("CheckSource: %v names the grading machine's path %s", err, dir)
			}
		})
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ttext\nlines", "plain\ttext\nlines"},
		{"\x1b[2K\r100/100", "�[2K�100/100"},
		{"bell\x07 nul\x00 soh\x01 del\x7f", "bell� nul� soh� del�"},
		{"c1 \u009b31m", "c1 �31m"},
		{"bidi \u202eevil\u202c zero\u200bwidth", "bidi evil zerowidth"},
		{"bad utf8 \xff\xfe", "bad utf8 ��"},
		{"ünïcödé ✓ <b>", "ünïcödé ✓ <b>"},
	} {
		if got := grade.Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// What a learner sees names nothing of the grading machine.
func TestStudentText(t *testing.T) {
	const out, tmp, bin, work = "/srv/grades", "/tmp/snacklab-grade-1", "/srv/grades/bob/bin", "/srv/grades/bob/logs/snacklab-step2-77"
	for _, tc := range []struct{ in, want string }{
		{"ran " + bin + "/queuectl --db " + work + "/queue.db init", "ran queuectl --db queue.db init"},
		{"  logs:     " + work + "/logs (the story: " + work + "/lab.log)\nnext", "next"},
		{"… 12 more lines in " + work + "/logs/01-queuectl.stdout", "… 12 more lines in logs/01-queuectl.stdout"},
		{"in the container: /sub/sender --db /work/snacklab-step8-123/queue.db", "in the container: sender --db queue.db"},
		{"cwd " + work + " and " + tmp, "cwd . and ."},
		{"github.com/x/sub/pkg and /srcdir stay", "github.com/x/sub/pkg and /srcdir stay"},
		{"build: /src/cmd/queuectl/main.go:3: bad", "build: cmd/queuectl/main.go:3: bad"},
		// Not only at a word's start, and the isolate's and engine's paths too.
		{"lowerdir=/tmp/snacklab-isolate-3/sub x/tmp/snacklab-isolate-3/sub/queuectl", "lowerdir=[grader]/sub [grader]/sub/queuectl"},
		{"host /var/lib/docker/containers/abc/hostname", "host [grader]"},
		{"b64 " + base64.StdEncoding.EncodeToString([]byte("cwd "+work)), "b64 [grader]"},
	} {
		if got := grade.StudentText(out, tmp, tc.in, bin, work); got != tc.want {
			t.Errorf("student(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
