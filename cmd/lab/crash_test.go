package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCrashUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown program", []string{"crash", "--program", "queue"}, "lab: crash: --program queue: want enqueue,sender,receiver,redrive,finish, or none. Try: lab crash --program receiver\n"},
		{"replay without a program", []string{"crash", "--at", "3"}, "lab: crash: --at replays a crash point of one program. Try: lab crash --program finish --at 3\n"},
		{"negative kills", []string{"crash", "--kills", "-1"}, "lab: crash: --kills and --at must be >= 0. Try: lab crash --kills 1000\n"},
		{"batch zero", []string{"crash", "--batch", "0"}, "lab: crash: --batch 0: want 1 to 1000. Try: lab crash --program sender --batch 3\n"},
		{"batch with power cuts", []string{"crash", "--power-cut", "--batch", "3"}, "lab: crash: --batch is for crash points, not --power-cut. Try: lab crash --power-cut --program enqueue\n"},
		{"unwritable report", []string{"crash", "--results", "/nonexistent/r.json"}, "lab: --results /nonexistent/r.json: directory /nonexistent does not exist; create it or choose another path. Nothing was run\n"},
		{"stray argument", []string{"crash", "8"}, "lab: crash: unexpected \"8\". Try: lab crash --program sender --at 3\n"},
		{"unknown budget", []string{"crash", "--power-cut", "--budget", "huge"}, "lab: crash: --budget \"huge\": want small or full. Try: lab crash --power-cut --budget full\n"},
		{"kills with power cuts", []string{"crash", "--power-cut", "--kills", "5"}, "lab: crash: --kills is for crash points, not --power-cut. Try: lab crash --power-cut --program enqueue\n"},
		{"budget without power cuts", []string{"crash", "--budget", "full"}, "lab: crash: --budget is for --power-cut. Try: lab crash --power-cut --budget …\n"},
		{"state without barrier", []string{"crash", "--power-cut", "--program", "enqueue", "--state", "2"}, "lab: crash: --state S replays a state of one barrier: give --barrier B too\n"},
		{"judged gid alone", []string{"crash", "--judged-gid", "5"}, "lab: crash: --judged-gid needs --judged-uid. Try: lab crash --judged-uid 300000\n"},
		{"judged as root", []string{"crash", "--judged-uid", "0"}, "lab: crash: --judged-uid 0: want a non-root uid. Try: lab crash --judged-uid 300000\n"},
		{"barrier without a program", []string{"crash", "--power-cut", "--barrier", "2"}, "lab: crash: --barrier replays a power cut of one program. Try: lab crash --power-cut --program enqueue --barrier 6\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lab(t, tc.args...)
			if r.code != 2 || r.stderr != tc.stderr {
				t.Errorf("lab %s: exit %d, stderr %q; want exit 2, stderr %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.stderr)
			}
		})
	}
}

// One crash point replayed on the reference: exit 0, the reports written.
func TestCrashReplayReports(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "results.json")
	r := lab(t, "crash", "--bin", bin, "--program", "enqueue", "--at", "5", "--work", dir, "--results", res)
	if strings.Contains(r.stderr, "SKIPPED") && os.Getenv("SNACKLAB_REQUIRE_STRACE") == "" {
		t.Skip(r.stderr)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "crash: enqueue    1 crash points, ok") {
		t.Fatalf("lab crash --at 5: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var gs struct {
		Score float64 `json:"score"`
		Tests []struct {
			Status string `json:"status"`
		} `json:"tests"`
	}
	b, err := os.ReadFile(res)
	if err != nil || json.Unmarshal(b, &gs) != nil || gs.Score != 1 || len(gs.Tests) != 1 || gs.Tests[0].Status != "passed" {
		t.Errorf("results.json = %s (%v), want one passed test", b, err)
	}
}
