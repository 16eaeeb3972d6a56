package systrace_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"snacklab/labsteps/systrace"
)

// Both ends of a pipe have one name, the one the kernel (and so strace -y)
// gives it; a file that is not a pipe has none.
func TestPipeName(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rn, err := systrace.PipeName(r)
	if err != nil {
		t.Fatal(err)
	}
	wn, err := systrace.PipeName(w)
	if err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(w.Fd())))
	if err != nil {
		t.Skip(err)
	}
	if rn != wn || wn != link {
		t.Errorf("PipeName: read end %q, write end %q, want both %q", rn, wn, link)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := systrace.PipeName(f); err == nil {
		t.Errorf("PipeName(regular file) = %q, want an error", got)
	}
}

// A version manager's shim (pyenv, rbenv, asdf, nvm) is a shell script whose
// command substitutions write to descriptor 1 of a subshell, a pipe of the
// shim's own. Under strace -f those writes are in the trace too: the
// program's output is only what reached the pipe the caller gave it.
func TestToFileIsTheCallersPipe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trace     string
		want, fd1 int // writes to pipe:[77] (ToFile); writes to fd 1 (ToStdout)
	}{
		{"a shim's command substitution, then the program", `10 write(1<pipe:[555]>, "/usr/bin/readlink\n", 18) = 18
11 write(1<pipe:[77]>, "{\"id\":\"o-1\"}\n", 13) = 13
`, 1, 2},
		{"a child writing the caller's pipe through another descriptor", `12 write(3<pipe:[77]>, "x\n", 2) = 2
12 write(1</dev/null>, "y\n", 2) = 2
`, 1, 1},
		{"nothing for the caller", `13 write(1<pipe:[555]>, "3.12.1\n", 7) = 7
`, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := systrace.Parse(strings.NewReader(tc.trace))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(tr.Filter(systrace.ToFile("pipe:[77]"))), tc.want; got != want {
				t.Errorf("ToFile(pipe:[77]): %d writes, want %d", got, want)
			}
			if got, want := len(tr.Filter(systrace.ToStdout)), tc.fd1; got != want {
				t.Errorf("ToStdout: %d writes, want %d", got, want)
			}
		})
	}
}

// The same with a real shell under strace: only the write that reached the
// caller's pipe is the program's output.
func TestToFileUnderStrace(t *testing.T) {
	if err := systrace.Available(); err != nil {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	name, err := systrace.PipeName(w)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "shim.trace")
	cmd := systrace.Command(context.Background(), systrace.Options{Out: out, Trace: []string{"write"}},
		"sh", "-c", `v=$(echo shim-says); v=$(printf '%s\n' "$v" | cat); echo answer`)
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("traced sh: %v", err)
	}
	if string(got) != "answer\n" {
		t.Fatalf("traced sh printed %q, want %q", got, "answer\n")
	}
	tr, err := systrace.ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mine := tr.Filter(systrace.ToFile(name))
	if len(mine) != 1 || !strings.Contains(mine[0].Args, `"answer\n"`) {
		t.Errorf("writes to %s: %+v, want the one write of \"answer\"", name, mine)
	}
	if n := len(tr.Filter(systrace.ToStdout)); n < 3 {
		t.Errorf("writes to fd 1: %d, want at least 3 (the substitutions' and the answer): the test shows nothing", n)
	}
}
