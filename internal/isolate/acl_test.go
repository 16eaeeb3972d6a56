package isolate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"snacklab/internal/isolate"
)

// A run's directory on a shared /tmp lets its own judged uids pass to the
// files they are given, and no other run's: not by listing, not by a name
// guessed, whoever asks.
func TestRunDirsPassOnlyTheirOwnJudged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check reads as other uids")
	}
	parent := t.TempDir()
	for _, d := range []string{filepath.Dir(parent), parent} { // reachable, as /tmp is
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(parent, "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "queuectl"), []byte("staged\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	const first, n = 250000, 4
	if err := isolate.PassOnly(dir, first, n); err != nil {
		t.Fatal(err)
	}
	as := func(uid int, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		return cmd.Run()
	}
	file := filepath.Join(dir, "queuectl")
	for _, tc := range []struct {
		what string
		uid  int
		args []string
		ok   bool
	}{
		{"the run's first judged uid reads a file it is given", first, []string{"cat", file}, true},
		{"the run's last judged uid reads it", first + n - 1, []string{"cat", file}, true},
		{"the run's judged cannot list the directory", first + 1, []string{"ls", dir}, false},
		{"the run's judged cannot write in it", first + 1, []string{"touch", filepath.Join(dir, "x")}, false},
		{"the next run's judged cannot pass", first + n, []string{"cat", file}, false},
		{"the run before's judged cannot pass", first - 1, []string{"cat", file}, false},
		{"nobody cannot pass", 65534, []string{"cat", file}, false},
	} {
		err := as(tc.uid, tc.args[0], tc.args[1:]...)
		if got := err == nil; got != tc.ok {
			t.Errorf("%s (uid %d: %v): succeeded %v, want %v (err %v)", tc.what, tc.uid, tc.args, got, tc.ok, err)
		}
	}
	// The judge, the owner, still lists and writes it.
	if _, err := os.ReadDir(dir); err != nil {
		t.Errorf("the owner cannot list the run's directory: %v", err)
	}
}
