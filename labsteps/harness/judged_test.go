package harness_test

import (
	"context"
	"os"
	"path/filepath"
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
