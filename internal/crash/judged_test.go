package crash_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/internal/tier"
	"snacklab/labsteps/harness"
)

// labBin is a lab built for the judged tests' helpers (lab judged-exec,
// judged-sql, judged-kill). Not this test binary: under -race its SQLite
// is instrumented, and the power cut's checks through judged-sql took 70
// times as long (140 s against 2 s) as the lab itself takes.
var labBin string

// TestMain builds that lab once for the package. Each judged test its own
// judged uid, and none of the grading containers' (300000 and up): every
// new world kills every process of its uid.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "snacklab-crash-test-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		labBin = filepath.Join(dir, "lab")
		build := exec.Command("go", "build", "-o", labBin, "snacklab/cmd/lab")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the lab: %v\n%s", err, out)
			return 1
		}
		// The judged must reach the lab through its temp dir.
		os.Chmod(dir, 0o755)
		return m.Run()
	}())
}

// TestJudgedEnqueue: with a judged identity every program of the story, the
// traced one included, runs as it: the files they make are its; the work
// dir is the judge's and unlistable, the logs the judge's alone; and the
// reference still survives every crash point and a short soak.
func TestJudgedEnqueue(t *testing.T) {
	tier.Slow(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run the programs as another uid")
	}
	bin := reference(t)
	work := t.TempDir()
	// The judged must reach bin and the work dir through the test's temp dirs.
	for _, d := range []string{filepath.Dir(bin), bin, filepath.Dir(work), work} {
		os.Chmod(d, 0o755)
	}
	j := &harness.Judged{UID: 66200, GID: 66200, Exec: []string{labBin, harness.JudgedExecCommand}}
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
	tier.Slow(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_CHOWN) to run the programs as another uid")
	}
	bin := reference(t)
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(bin), bin, filepath.Dir(work), work} {
		os.Chmod(d, 0o755)
	}
	j := &harness.Judged{UID: 66300, GID: 66300, Exec: []string{labBin, harness.JudgedExecCommand}}
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
