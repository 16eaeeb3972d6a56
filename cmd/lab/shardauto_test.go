package main_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/grade"
	"snacklab/internal/tier"
)

// labEnv runs the lab with env added to an environment cleared of every
// variable --shard auto reads (the CI running this test may set some).
func labEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	drop := map[string]bool{grade.ShardsEnv: true}
	for _, s := range grade.ShardSources {
		drop[s.Index], drop[s.Total] = true, true
	}
	var base []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			base = append(base, kv)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "lab"), args...)
	cmd.Env = append(base, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestShardAutoUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		stderr string
	}{
		{"nothing in the environment", nil, []string{"--shard", "auto", "--shards", "2"}, "no shard index in the environment (looked for JOB_COMPLETION_INDEX, CI_NODE_INDEX"},
		{"an index without a count", []string{"JOB_COMPLETION_INDEX=1"}, []string{"--shard", "auto"}, "pass --shards N"},
		{"counts that disagree", []string{"JOB_COMPLETION_INDEX=0", "SNACKLAB_SHARDS=3"}, []string{"--shard", "auto", "--shards", "2"}, "disagree"},
		{"an index out of range", []string{"CI_NODE_INDEX=3", "CI_NODE_TOTAL=2"}, []string{"--shard", "auto"}, "out of range"},
		{"--shards without auto", nil, []string{"--shard", "0/2", "--shards", "2"}, "--shards goes with --shard auto"},
		{"a pattern matching nothing", []string{"JOB_COMPLETION_INDEX=0"}, []string{"--shard", "auto", "--shards", "1", filepath.Join(t.TempDir(), "*")}, "matches nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"grade", "--trusted", "--out", filepath.Join(t.TempDir(), "out")}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "*") {
				args = append(args, bin)
			}
			r := labEnv(t, tc.env, args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("lab %s with %v: got exit %d, stderr %q; want exit 2 and %q", strings.Join(args, " "), tc.env, r.code, r.stderr, tc.stderr)
			}
		})
	}
}

// A pod's command: the shard from JOB_COMPLETION_INDEX and --shards, the
// cohort as a quoted pattern that lab expands (no shell in the image).
func TestShardAutoGradesItsSlice(t *testing.T) {
	tier.Slow(t)
	root := t.TempDir()
	for _, name := range []string{"ann", "bob", "cid"} {
		dir := filepath.Join(root, "cohort", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"queuectl", "sender", "receiver"} {
			b, err := os.ReadFile(filepath.Join(bin, p))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := filepath.Join(root, "shard-1")
	r := labEnv(t, []string{"JOB_COMPLETION_INDEX=1"}, "grade", "--trusted", "--points", "1=100", "--shard", "auto", "--shards", "2",
		"--out", out, filepath.Join(root, "cohort", "*"))
	if r.code != 0 {
		t.Fatalf("lab grade --shard auto: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"lab grade: shard 1/2 from JOB_COMPLETION_INDEX=1 and --shards 2", "(shard 1/2 of a cohort of 3)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout: want %q in\n%s", want, r.stdout)
		}
	}
	// Shard 1 of 2 of ann, bob, cid is bob alone.
	for name, want := range map[string]bool{"ann": false, "bob": true, "cid": false} {
		_, err := os.Stat(filepath.Join(out, name, "results.json"))
		if got := err == nil; got != want {
			t.Errorf("%s graded by shard 1/2: got %v, want %v", name, got, want)
		}
	}
}
