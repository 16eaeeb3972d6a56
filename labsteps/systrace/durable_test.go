package systrace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/labsteps/systrace"
)

// commit is what a rollback-journal commit with synchronous=FULL does.
const commit = `7 pwrite64(4</w/q.db-journal>, "\331\325", 512, 0) = 512
7 fsync(4</w/q.db-journal>) = 0
7 fsync(5</w>) = 0
7 pwrite64(4</w/q.db-journal>, "\331\325", 12, 0) = 12
7 fsync(4</w/q.db-journal>) = 0
7 pwrite64(3</w/q.db>, "SQLite", 4096, 0) = 4096
7 fsync(3</w/q.db>) = 0
7 unlink("/w/q.db-journal") = 0
`

func TestDurable(t *testing.T) {
	answer := "7 write(1<pipe:[9]>, \"{}\\n\", 3) = 3\n"
	tests := []struct {
		name, trace string
		wantCommit  bool
		wantErr     string // "" for durable
	}{
		{"commit then answer", commit + answer, true, ""},
		{"answer before anything", answer + commit, true, "no commit"},
		{"answer before anything, nothing promised", answer + commit, false, ""},
		{"synchronous=OFF", strings.NewReplacer("7 fsync(3</w/q.db>) = 0\n", "", "7 fsync(4</w/q.db-journal>) = 0\n", "").Replace(commit) + answer, true, "no fsync/fdatasync"},
		{"journal left in place", strings.Replace(commit, "7 unlink(\"/w/q.db-journal\") = 0\n", "", 1) + answer, true, "still in place"},
		{"failed fsync", strings.Replace(commit, "7 fsync(3</w/q.db>) = 0", "7 fsync(3</w/q.db>) = -1 EIO (Input/output error)", 1) + answer, true, "no fsync/fdatasync"},
		{"second transaction after the answer", commit + answer + commit, true, ""},
		// Paths as a program in another language may give them: relative to
		// its working directory, or to a directory descriptor.
		{"journal unlinked by a relative path", strings.Replace(commit, `unlink("/w/q.db-journal")`, `unlink("./q.db-journal")`, 1) + answer, true, ""},
		{"journal unlinked at a directory descriptor", strings.Replace(commit, `unlink("/w/q.db-journal")`, `unlinkat(5</w>, "q.db-journal", 0)`, 1) + answer, true, ""},
		{"another directory's journal unlinked", strings.Replace(commit, `unlink("/w/q.db-journal")`, `unlinkat(5</elsewhere>, "q.db-journal", 0)`, 1) + answer, true, "still in place"},
		{"another file's journal unlinked", strings.Replace(commit, `unlink("/w/q.db-journal")`, `unlink("/w/other.db-journal")`, 1) + answer, true, "still in place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := systrace.Parse(strings.NewReader(tt.trace))
			if err != nil {
				t.Fatal(err)
			}
			report := systrace.FirstReport(tr, systrace.ToStdout)
			c, err := systrace.Durable(tr, "/w/q.db", report, tt.wantCommit)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Durable = %v, want durable", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, systrace.ErrNotDurable)):
				t.Errorf("Durable = %v, want ErrNotDurable saying %q", err, tt.wantErr)
			case tt.wantErr == "" && tt.wantCommit && !(c.Write >= 0 && c.Write < c.Sync && c.Sync < c.JournalGone && c.JournalGone < report):
				t.Errorf("Durable found the commit at %+v, want write < sync < journal removed < the answer (#%d)", c, report)
			}
		})
	}
}

// TestKillAt kills a shell as it enters its second write to stdout, counted
// across the process, and checks the first write ran and the second did not.
func TestKillAt(t *testing.T) {
	if err := systrace.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	// A wrapper that execs, and one that forks, as a script in another
	// language would: both are followed, and the count spans them.
	for _, script := range []string{"echo one; echo two; echo three", "exec /bin/sh -c 'echo one; echo two; echo three'",
		"/bin/sh -c 'echo one; echo two'; echo three"} {
		t.Run(script, func(t *testing.T) { killAtShell(t, dir, script) })
	}
}

func killAtShell(t *testing.T, dir, script string) {
	for _, n := range []int{0, 1, 2, 3, 4} {
		out, err := os.Create(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := systrace.KillAt([]string{"/bin/sh", "-c", script}, systrace.KillOptions{
			Stdout: out, N: n, Match: func(s systrace.Site) bool { return s.Name == "write" && s.FD == 1 }})
		if err != nil {
			if errors.Is(err, systrace.ErrNoPtrace) {
				t.Skip(err)
			}
			t.Fatal(err)
		}
		k, err := p.Wait()
		out.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out.Name())
		want := strings.Join([]string{"one\n", "two\n", "three\n"}[:max(0, n-1)], "")
		if n == 0 || n == 4 {
			want = "one\ntwo\nthree\n"
		}
		if string(got) != want {
			t.Errorf("N=%d: printed %q, want %q", n, got, want)
		}
		if hit := n >= 1 && n <= 3; (k.Hit != nil) != hit || hit && (k.Hit.Index != n || k.Signal != "SIGKILL") {
			t.Errorf("N=%d: hit %+v, signal %q; want hit=%v at index %d", n, k.Hit, k.Signal, hit, n)
		}
	}
}

// TestCallPath: the file a call works on, from strace's text and from
// KillAt's calls, which carry the resolved path and no arguments.
func TestCallPath(t *testing.T) {
	for _, tt := range []struct {
		c    systrace.Call
		want string
	}{
		{systrace.Call{Name: "pwrite64", FD: 3, Path: "/w/q.db", Args: `3</w/q.db>, "SQLite", 4096, 0`}, "/w/q.db"},
		{systrace.Call{Name: "unlink", Args: `"/w/q.db-journal"`}, "/w/q.db-journal"},
		{systrace.Call{Name: "unlink", Args: `"q.db-journal"`}, "q.db-journal"},
		{systrace.Call{Name: "unlinkat", FD: 5, Path: "/w", Args: `5</w>, "q.db-journal", 0`}, "/w/q.db-journal"},
		{systrace.Call{Name: "unlinkat", FD: 5, Path: "/w", Args: `5</w>, "/x/q.db-journal", 0`}, "/x/q.db-journal"},
		{systrace.Call{Name: "unlinkat", FD: -1, Path: "/w/q.db-journal"}, "/w/q.db-journal"}, // KillAt
		{systrace.Call{Name: "unlink", FD: -1, Path: "/w/q.db-journal"}, "/w/q.db-journal"},   // KillAt
	} {
		if got := systrace.CallPath(tt.c); got != tt.want {
			t.Errorf("CallPath(%s(%s) path %q) = %q, want %q", tt.c.Name, tt.c.Args, tt.c.Path, got, tt.want)
		}
	}
}
