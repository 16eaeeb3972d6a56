package crash_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/labsteps/harness"
)

// TestMain lets this test binary be the lab's judged helpers (lab
// judged-exec, lab judged-sql), so the judged tests need no lab binary.
// Each test its own judged uid, and none of the grading containers'
// (65533 and up): every new world kills every process of its uid.
func TestMain(m *testing.M) {
	if ok, err := harness.Helper(os.Args[1:], os.Stdin, os.Stdout); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(127)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestJudgedEnqueue: with a judged identity every program of the story, the
// traced one included, runs as it: the files they make are its; the work
// dir is the judge's and unlistable, the logs the judge's alone; and the
// reference still survives every crash point and a short soak.
func TestJudgedEnqueue(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run the programs as another uid")
	}
	bin := reference(t)
	work := t.TempDir()
	// The judged must reach bin and the work dir through the test's temp dirs.
	for _, d := range []string{filepath.Dir(bin), bin, filepath.Dir(work), work} {
		os.Chmod(d, 0o755)
	}
	j := &harness.Judged{UID: 66200, GID: 66200, Exec: []string{os.Args[0], harness.JudgedExecCommand}}
	rep := run(t, crash.Config{Bin: bin, Work: work, Keep: true, Programs: []string{"enqueue"}, Seed: 3, Kills: 10, Judged: j})
	if !rep.OK || len(rep.Points) < 5 {
		t.Fatalf("the reference as the judged: ok %v, %d crash points, violations %v, programs %+v; want ok and at least 5 points",
			rep.OK, len(rep.Points), rep.Violations, rep.Programs)
	}
	point := filepath.Join(rep.Work, "enqueue-001")
	for path, want := range map[string]uint32{
		filepath.Join(point, "data", "q.db"): 66200, // made by queuectl init, as the judged
		filepath.Join(point, "data"):         66200,
		filepath.Join(point, "logs"):         0,
	} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil || st.Uid != want {
			t.Errorf("%s: owner %d (%v), want %d", path, st.Uid, err, want)
		}
	}
	for path, mode := range map[string]os.FileMode{rep.Work: 0o711, point: 0o711, filepath.Join(point, "logs"): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, mode)
		}
	}
	if rep.Soak == nil || len(rep.Soak.Violations) > 0 || rep.Soak.Kills != 10 {
		t.Errorf("soak as the judged: %+v, want 10 kills and no violation", rep.Soak)
	}
}

// TestJudgedPowerCutEnqueue: under the power cut too, the recorded program
// and every restart run as the judged, on state files handed to it; the
// reference's enqueue survives every state of the small budget.
func TestJudgedPowerCutEnqueue(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run the programs as another uid")
	}
	bin := reference(t)
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(bin), bin, filepath.Dir(work), work} {
		os.Chmod(d, 0o755)
	}
	j := &harness.Judged{UID: 66300, GID: 66300, Exec: []string{os.Args[0], harness.JudgedExecCommand}}
	rep := powerCut(t, crash.PowerCutConfig{Bin: bin, Work: work, Keep: true, Programs: []string{"enqueue"}, Budget: powercut.Small, Seed: 5, Judged: j})
	if !rep.OK || rep.Programs[0].Checked < rep.Programs[0].Barriers || rep.Programs[0].Barriers < 7 {
		t.Fatalf("the reference's enqueue as the judged: ok %v, programs %+v, violations %+v", rep.OK, rep.Programs, rep.Violations)
	}
	var st syscall.Stat_t
	q := filepath.Join(rep.Work, "enqueue", "record", "data", "q.db")
	if err := syscall.Stat(q, &st); err != nil || st.Uid != 66300 {
		t.Errorf("%s: owner %d (%v), want 66300", q, st.Uid, err)
	}
}
