package systrace_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"snacklab/labsteps/systrace"
)

const sample = `6014  fcntl(5</tmp/st/q.db>, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=1073741825, l_len=1}) = -1 EAGAIN (Resource temporarily unavailable)
6014  pwrite64(6</tmp/st/q.db-journal>, "\0\0\0\1", 4, 16928) = 4
6013  write(1<pipe:[991]>, "{\"job\":{}}\n", 11 <unfinished ...>
6014  fsync(5</tmp/st/q.db>)            = 0
6013  <... write resumed>)              = 11
6014  unlink("/tmp/st/q.db-journal")    = 0
6016  fsync(6</tmp/st/q.db-journal> <unfinished ...>
6017  +++ killed by SIGKILL +++
6016  <... fsync resumed>)              = ?
6016  +++ killed by SIGKILL +++
6012  +++ exited with 0 +++
`

func TestParse(t *testing.T) {
	tr, err := systrace.Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		pid        int
		name, path string
		fd         int
		ret        int64
		errno      string
		unfinished bool
	}
	wants := []want{
		{6014, "fcntl", "/tmp/st/q.db", 5, -1, "EAGAIN", false},
		{6014, "pwrite64", "/tmp/st/q.db-journal", 6, 4, "", false},
		{6013, "write", "pipe:[991]", 1, 11, "", false}, // joined at the place it began
		{6014, "fsync", "/tmp/st/q.db", 5, 0, "", false},
		{6014, "unlink", "", -1, 0, "", false},
		{6016, "fsync", "/tmp/st/q.db-journal", 6, 0, "", true},
	}
	if got := len(tr.Calls); got != len(wants) {
		t.Fatalf("Parse found %d calls, want %d: %+v", got, len(wants), tr.Calls)
	}
	for i, w := range wants {
		c := tr.Calls[i]
		got := want{c.PID, c.Name, c.Path, c.FD, c.Ret, c.Errno, c.Unfinished}
		if got != w || c.Seq != i {
			t.Errorf("call %d = %+v (seq %d), want %+v", i, got, c.Seq, w)
		}
	}
	if got := tr.Calls[2].Args; !strings.HasSuffix(got, `, 11`) {
		t.Errorf("joined write args = %q, want the resumed half appended", got)
	}
	if tr.Killed[6016] != "SIGKILL" || tr.Exited[6012] != 0 || len(tr.Exited) != 1 {
		t.Errorf("Killed=%v Exited=%v, want 6016 SIGKILL and 6012 exit 0", tr.Killed, tr.Exited)
	}
	last, err := tr.Last(func(c systrace.Call) bool { return c.Name == "fsync" && !c.Unfinished })
	if err != nil || last.Seq != 3 {
		t.Errorf("Last completed fsync = %+v, %v; want seq 3", last, err)
	}
}

func TestParseTimestamps(t *testing.T) {
	const stamped = `700 1700000000.250000 fcntl(5</q.db>, F_SETLK, {l_type=F_WRLCK}) = -1 EAGAIN (Resource temporarily unavailable)
700 1700000000.500001 exit_group(6)  = ?
700 1700000000.500100 +++ exited with 6 +++
`
	tr, err := systrace.Parse(strings.NewReader(stamped))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tr.Calls), 2; got != want {
		t.Fatalf("Parse found %d calls, want %d", got, want)
	}
	if got, want := tr.Calls[1].Time.Sub(tr.Calls[0].Time), 250001*time.Microsecond; got != want {
		t.Errorf("time between the calls = %v, want %v", got, want)
	}
	if c := tr.Calls[0]; c.Name != "fcntl" || c.Errno != "EAGAIN" || c.Path != "/q.db" {
		t.Errorf("first call = %+v, want the refused fcntl on /q.db", c)
	}
	if got := tr.Exited[700]; got != 6 {
		t.Errorf("Exited[700] = %d, want 6", got)
	}
}

func TestParseSoFar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "running.trace")
	half := "9 fsync(3</q.db>) = 0\n9 unlink(\"/q.db-jour"
	if err := os.WriteFile(path, []byte(half), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := systrace.ParseSoFar(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tr.Calls), 1; got != want {
		t.Fatalf("ParseSoFar found %d calls, want %d (the half-written line is left for later)", got, want)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := systrace.Parse(strings.NewReader("hello world\n")); err == nil {
		t.Fatal("Parse accepted a line with no pid")
	}
}

// TestTraceAndInject runs a real shell under strace: once recording its
// writes, once killed as it enters its second write.
func TestTraceAndInject(t *testing.T) {
	if err := systrace.Available(); err != nil {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	script := "echo one; echo two; echo three"
	out := filepath.Join(dir, "plain.trace")
	cmd := systrace.Command(context.Background(), systrace.Options{Out: out, Trace: []string{"write"}}, "sh", "-c", script)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("traced sh: %v", err)
	}
	if got, want := string(stdout), "one\ntwo\nthree\n"; got != want {
		t.Fatalf("traced sh printed %q, want %q", got, want)
	}
	tr, err := systrace.ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	writes := tr.Filter(func(c systrace.Call) bool { return c.Name == "write" && c.FD == 1 })
	if len(writes) != 3 {
		t.Fatalf("recorded %d writes to fd 1, want 3: %+v", len(writes), tr.Calls)
	}

	out = filepath.Join(dir, "killed.trace")
	cmd = systrace.Command(context.Background(), systrace.Options{Out: out, Trace: []string{"write"},
		Inject: []string{"write:signal=KILL:when=2"}}, "sh", "-c", script)
	stdout, err = cmd.Output()
	if err == nil {
		t.Fatal("sh killed at its second write exited cleanly")
	}
	if got, want := string(stdout), "one\n"; got != want {
		t.Errorf("killed sh printed %q, want %q (the second write never ran)", got, want)
	}
	tr, err = systrace.ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	last := tr.Calls[len(tr.Calls)-1]
	if last.Name != "write" || !last.Unfinished || !strings.Contains(last.Args, `"two\n"`) {
		t.Errorf("last call %+v; want the unfinished write of \"two\"", last)
	}
	if st := cmd.ProcessState; st == nil || st.ExitCode() != -1 {
		t.Errorf("strace ended with %v, want killed by the same signal as its tracee", st)
	}
}

func TestFiles(t *testing.T) {
	if err := systrace.Available(); err != nil {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	files, err := systrace.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || filepath.Base(files[0]) != "strace" {
		t.Fatalf("Files() = %v, want strace first", files)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil || !filepath.IsAbs(f) {
			t.Errorf("Files() lists %q: %v (want absolute paths of existing files)", f, err)
		}
	}
	t.Logf("strace needs %d files: %v", len(files), files)
}

// TestTraceAsUser: with Options.User the program runs as that account
// (strace -u) while strace, and so the trace file, stays the caller's.
func TestTraceAsUser(t *testing.T) {
	if err := systrace.Available(); err != nil {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("strace -u needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no account nobody here: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "user.trace")
	opts := systrace.Options{Out: out, Trace: []string{"write"}, User: "nobody"}
	argv := systrace.Args(opts, "id", "-u")
	if i, j := slices.Index(argv, "-u"), slices.Index(argv, "--"); i < 0 || j < i || argv[i+1] != "nobody" {
		t.Fatalf("argv %q: want -u nobody before --", argv)
	}
	stdout, err := systrace.Command(context.Background(), opts, "id", "-u").Output()
	if err != nil {
		t.Fatalf("traced id: %v", err)
	}
	if got := strings.TrimSpace(string(stdout)); got != u.Uid {
		t.Errorf("the traced program's uid: got %s, want nobody's %s", got, u.Uid)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("the trace file's owner: got uid %d, want 0 (strace's, not the program's)", st.Uid)
	}
}
