package harness_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// TestJudgedRunsApart: with a judged identity, a program runs as it, in a
// scratch dir it owns; the step's root and logs are the judge's; and a
// FIFO and symlinks the program plants where the lab writes do not stall or
// redirect the lab: its logs are written afresh in its own dir.
func TestJudgedRunsApart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run a program as another uid")
	}
	bin := t.TempDir()
	// The judged must reach bin and the step through the test's temp dirs.
	os.Chmod(filepath.Dir(bin), 0o755)
	os.Chmod(bin, 0o755)
	// The "queuectl" reports its uid and attacks what it can reach.
	script := "#!/bin/sh\nid -u\nmkfifo ../lab.log 2>/dev/null && echo FIFO-OK\nln -s /etc/passwd ../logs/x 2>/dev/null && echo LINK-OK\n" +
		"mkfifo lab.log; ln -s " + filepath.Join(bin, "canary") + " 01-queuectl-init.stdout\n"
	if err := os.WriteFile(filepath.Join(bin, "queuectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "step")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(root), 0o755)
	j := &harness.Judged{UID: 65533, GID: 65533}
	l := result.DeriveLimits(result.Calibration{}, 0, 0)
	h, err := harness.NewStep(context.Background(), root, bin, l, j)
	if err != nil {
		t.Fatalf("NewStep: %v", err)
	}
	r := h.Exec("queuectl", "init")
	if got := strings.TrimSpace(r.Stdout); got != "65533" {
		t.Errorf("the program's uid and output: got %q (stderr %q), want 65533 and no attack that succeeded", got, r.Stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(h.Dir, &st); err != nil || st.Uid != 65533 {
		t.Errorf("scratch %s: got uid %d (%v), want 65533", h.Dir, st.Uid, err)
	}
	for path, mode := range map[string]os.FileMode{root: 0o711, h.LogDir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: got %v (%v), want %v", path, fi.Mode().Perm(), err, mode)
		}
	}
	if err := h.WriteLogs(); err != nil {
		t.Fatalf("WriteLogs: %v", err)
	}
	fi, err := os.Lstat(filepath.Join(root, "lab.log"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("lab.log: got %v (%v), want a regular file the lab wrote", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(bin, "canary")); !os.IsNotExist(err) {
		t.Errorf("the canary a planted link points to: got %v, want nothing written there", err)
	}
}

// TestMain lets the test binary stand in for the lab's judged helpers
// (judged-exec, judged-sql: harness.Helper).
func TestMain(m *testing.M) {
	if ok, err := harness.Helper(os.Args[1:], os.Stdin, os.Stdout); ok {
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(127)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestJudgedSQLHandKeepsTheJudgesRights: the lab's own edits of a program's
// SQLite file (a trap, a lock, a hand-made break) run as the judged, so a
// link a program planted at the file's name or at its journal's cannot make
// the lab write one of its own files. Without the judged hand, SQLite (as
// the lab) would follow both links.
func TestJudgedSQLHandKeepsTheJudgesRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run as another uid")
	}
	root := filepath.Join(t.TempDir(), "step")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(root), 0o755) // the judged reach scratch through the test's temp dirs
	os.Chmod(filepath.Dir(filepath.Dir(root)), 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j := &harness.Judged{UID: 65533, GID: 65533, Exec: []string{self, harness.JudgedExecCommand}}
	h, err := harness.NewStep(context.Background(), root, t.TempDir(), result.DeriveLimits(result.Calibration{}, 0, 0), j)
	if err != nil {
		t.Fatalf("NewStep: %v", err)
	}
	// The judge's own files, in its logs dir: one SQLite file, one not.
	judgeDB, precious := filepath.Join(h.LogDir, "judge.db"), filepath.Join(h.LogDir, "precious.txt")
	if err := os.WriteFile(precious, []byte("the judge's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hand, err := (*harness.Judged)(nil).OpenSQL(context.Background(), "file:"+judgeDB+"?mode=rwc")
	if err != nil || hand.Exec(context.Background(), "CREATE TABLE jobs (id TEXT PRIMARY KEY)") != nil || hand.Close() != nil {
		t.Fatalf("the judge's own SQLite file: %v", err)
	}
	before, _ := os.ReadFile(judgeDB)

	// A program's queue file whose name is a link to the judge's file.
	h.UseQueue("queue.db")
	if err := os.Symlink(judgeDB, h.DB); err != nil {
		t.Fatal(err)
	}
	h.Do(func(h *harness.Harness) { h.BreakQueue("a table of the lab's", "CREATE TABLE pwned (x)") })
	// A real queue file of the program's, its journal's name a link to the
	// judge's text file: a write makes SQLite create the journal.
	h.UseQueue("real.db")
	h.Do(func(h *harness.Harness) { h.MakeSQLite("CREATE TABLE jobs (id TEXT PRIMARY KEY)") })
	if err := os.Symlink(precious, h.DB+"-journal"); err != nil {
		t.Fatal(err)
	}
	h.Do(func(h *harness.Harness) { h.BreakQueue("a row", "INSERT INTO jobs VALUES ('x')") })

	var r result.Result
	h.Record(&r)
	if after, _ := os.ReadFile(judgeDB); string(after) != string(before) {
		t.Errorf("the judge's SQLite file changed through the link at queue.db")
	}
	if b, _ := os.ReadFile(precious); string(b) != "the judge's\n" {
		t.Errorf("the judge's file through the link at real.db-journal: got %q, want it untouched", b)
	}
	var failed []string
	for _, c := range r.Checks {
		if !c.OK {
			failed = append(failed, c.What+": "+c.Observed)
		}
	}
	if len(failed) != 2 {
		t.Errorf("failed checks: got %q, want the two edits through links refused (permission denied)", failed)
	}
}

// TestJudgedSQLHandSaysWhyItEnded: a helper that ends before it answers
// (here it refuses uid 0) is an error naming what it printed.
func TestJudgedSQLHandSaysWhyItEnded(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j := &harness.Judged{UID: 0, GID: 0, Exec: []string{self, harness.JudgedExecCommand}}
	_, err = j.OpenSQL(context.Background(), "file:"+filepath.Join(t.TempDir(), "q.db")+"?mode=rw")
	if err == nil || !strings.Contains(err.Error(), "want a non-zero numeric UID") {
		t.Errorf("OpenSQL as uid 0: got %v, want the helper's refusal", err)
	}
}

// TestKillAllEndsWhatLeftItsGroup: a program that leaves its process group
// (setsid) outlives the kill of the groups the step started; KillAll ends
// it, and ends nothing of another step's identity.
func TestKillAllEndsWhatLeftItsGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID) to run as another uid")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not the grading containers' 300000 and up: KillAll reaches every
	// process of its uid on this machine, and the isolation tests' judged
	// programs are host processes of those uids.
	base := &harness.Judged{UID: 66000, GID: 66000, Exec: []string{self, harness.JudgedExecCommand}}
	escapee, neighbour := base.ForStep(3), base.ForStep(4)
	if escapee.UID != 66003 || escapee.GID != 66003 {
		t.Fatalf("ForStep(3): got uid %d gid %d, want 66003 66003", escapee.UID, escapee.GID)
	}
	start := func(j *harness.Judged, script string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = j.ProcAttr()
		cmd.Dir = "/"
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The script says the pid of what it left running, then ends.
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("the script's pid line: %v", err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() })
		cmd.Process.Signal(syscall.SIGKILL) // the group's kill, as the harness does
		cmd.Wait()
		return &exec.Cmd{Process: &os.Process{Pid: pid}}
	}
	left := start(escapee, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
	other := start(neighbour, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
	if !alive(left.Process.Pid) || !alive(other.Process.Pid) {
		t.Fatalf("the setsid children: got alive %v and %v, want both running before KillAll", alive(left.Process.Pid), alive(other.Process.Pid))
	}
	if err := escapee.KillAll(); err != nil {
		t.Fatalf("KillAll: %v", err)
	}
	if alive(left.Process.Pid) {
		t.Errorf("step 3's setsid child %d: still running after KillAll", left.Process.Pid)
	}
	if !alive(other.Process.Pid) {
		t.Errorf("step 4's setsid child %d: ended by step 3's KillAll, want it left alone", other.Process.Pid)
	}
}

// alive is whether pid runs (not a zombie, not gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// accountFiles is a lookup over an /etc/passwd and /etc/group, as os/user
// reads them: name, uid and gid from passwd; a uid's groups are its primary
// gid and every group that lists its name.
func accountFiles(passwd, group string) func(string) (harness.Account, error) {
	return func(uid string) (harness.Account, error) {
		byName := map[string][]string{}
		var a harness.Account
		for _, l := range strings.Split(strings.TrimSpace(passwd), "\n") {
			f := strings.Split(l, ":")
			if _, ok := byName[f[0]]; !ok {
				byName[f[0]] = f
			}
			if f[2] == uid && a.Name == "" {
				a = harness.Account{Name: f[0], UID: f[2], GID: f[3], Groups: []string{f[3]}}
			}
		}
		if a.Name == "" {
			return a, fmt.Errorf("no account of uid %s", uid)
		}
		for _, l := range strings.Split(strings.TrimSpace(group), "\n") {
			f := strings.Split(l, ":")
			if f[2] != a.GID && slices.Contains(strings.Split(f[3], ","), a.Name) {
				a.Groups = append(a.Groups, f[2])
			}
		}
		a.Back = byName[a.Name][2]
		return a, nil
	}
}

// TestStraceUser: strace runs a traced program by name only inside the
// grading image, as exactly the step's identity with no other group, and
// never a set-user-ID program; everywhere else the judged-exec step does.
func TestStraceUser(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "queuectl")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(t.TempDir(), "sender")
	if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o555|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	passwd, group := harness.Accounts(65533, 65533)
	image := accountFiles(string(passwd), string(group))
	base := &harness.Judged{UID: 65533, GID: 65533, Accounts: true}
	step7 := base.ForStep(7)
	tests := []struct {
		name   string
		j      *harness.Judged
		prog   string
		lookup func(string) (harness.Account, error)
		want   string
	}{
		{"the image names each step's identity", step7, prog, image, "judged-step7"},
		{"the last step id too", base.ForStep(16), prog, image, "judged-step16"},
		{"no judged identity", nil, prog, image, ""},
		{"outside the grading container", &harness.Judged{UID: 65540, GID: 65540}, prog, image, ""},
		{"the base identity has no name", base, prog, image, ""},
		{"a set-user-ID program", step7, suid, image, ""},
		{"a program that is not there", step7, prog + "-gone", image, ""},
		{"another gid", &harness.Judged{UID: 65540, GID: 65541, Accounts: true}, prog, image, ""},
		{"a group of its own beside", step7, prog, accountFiles(string(passwd), string(group)+"docker:x:999:judged-step7\n"), ""},
		{"its name maps to another uid first", step7, prog, accountFiles("judged-step7:x:0:0::/:/x\n"+string(passwd), string(group)), ""},
		{"no account files", step7, prog, func(string) (harness.Account, error) { return harness.Account{}, os.ErrNotExist }, ""},
	}
	for _, tc := range tests {
		if got := harness.StraceUser(tc.j, tc.prog, tc.lookup); got != tc.want {
			t.Errorf("%s: got strace -u %q, want %q", tc.name, got, tc.want)
		}
	}
}
