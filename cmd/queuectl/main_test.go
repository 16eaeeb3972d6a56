package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"snacklab/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m, "queuectl") }

type result struct {
	code           int
	stdout, stderr string
}

func qc(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(testbin.Path("queuectl"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run queuectl %v: %v", args, err)
	}
	return result{code, stdout.String(), stderr.String()}
}

func mustQC(t *testing.T, args ...string) map[string]any {
	t.Helper()
	r := qc(t, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("queuectl %v: exit %d, stderr %q", args, r.code, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("queuectl %v: stdout %q is not one JSON object: %v", args, r.stdout, err)
	}
	return v
}

func TestLabStoryThroughTheCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	mustQC(t, "init", "--db", db)
	mustQC(t, "enqueue", "--db", db, "--id", "o-1", "--qty", "7", "--max-attempts", "3", "--now-ms", "1000")
	a := mustQC(t, "claim", "--db", db, "--owner", "A", "--lease-ms", "500", "--now-ms", "1000")["job"].(map[string]any)
	if got, want := a["token"], 1.0; got != want {
		t.Fatalf("A's token = %v, want %v", got, want)
	}
	if r := qc(t, "claim", "--db", db, "--owner", "B", "--now-ms", "1499", "--json"); r.code != 13 || strings.TrimSpace(r.stdout) != `{"claimed":false}` {
		t.Fatalf("claim at lease_until-1 = exit %d %q, want 13 {\"claimed\":false}", r.code, r.stdout)
	}
	b := mustQC(t, "claim", "--db", db, "--owner", "B", "--now-ms", "1500")["job"].(map[string]any)
	if got, want := b["token"], 2.0; got != want {
		t.Fatalf("B's token = %v, want %v", got, want)
	}
	if r := qc(t, "finish", "--db", db, "--id", "o-1", "--token", "1", "--outcome", "ok", "--json"); r.code != 12 || !strings.Contains(r.stdout, `"applied":false`) {
		t.Fatalf("late finish with token 1 = exit %d %q, want 12 and applied false", r.code, r.stdout)
	}
	if inv := mustQC(t, "investigate", "o-1", "--db", db, "--note", "INC-1", "--now-ms", "1550")["investigation"].(map[string]any); inv["job_id"] != "o-1" {
		t.Fatalf("investigate with a bare id = %v", inv)
	}
	if r := qc(t, "investigate", "o-1", "o-2", "--db", db, "--note", "INC-1"); r.code != 2 {
		t.Fatalf("investigate with two bare ids: exit %d, want 2", r.code)
	}
	done := mustQC(t, "finish", "--db", db, "--id", "o-1", "--token", "2", "--outcome", "ok", "--now-ms", "1600")["job"].(map[string]any)
	if done["state"] != "done" || done["qty"] != 7.0 || done["owner"] != nil || done["lease_until"] != nil {
		t.Fatalf("after B's finish: %v", done)
	}
}

func TestBadInputExitsWithItsCodeAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	mustQC(t, "init", "--db", db)
	mustQC(t, "enqueue", "--db", db, "--id", "o-1", "--qty", "7", "--now-ms", "1000")
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("not sqlite "), 100), 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no verb", nil, 2, "no verb given"},
		{"unknown verb", []string{"frobnicate"}, 2, `unknown verb "frobnicate"`},
		{"unknown flag", []string{"claim", "--db", db, "--owner", "A", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"missing required flag", []string{"enqueue", "--db", db, "--id", "o-2"}, 2, "--qty is required"},
		{"missing --db", []string{"stats"}, 2, "--db is required"},
		{"stray argument", []string{"stats", "--db", db, "extra"}, 2, `unexpected argument "extra"`},
		{"malformed number", []string{"enqueue", "--db", db, "--id", "o-2", "--qty", "seven"}, 2, "invalid value"},
		{"qty zero", []string{"enqueue", "--db", db, "--id", "o-2", "--qty", "0"}, 3, "qty 0"},
		{"non-ASCII id", []string{"enqueue", "--db", db, "--id", "é", "--qty", "1"}, 3, `id "é"`},
		{"bad outcome", []string{"finish", "--db", db, "--id", "o-1", "--token", "1", "--outcome", "yes"}, 3, `outcome "yes"`},
		{"bad owner", []string{"claim", "--db", db, "--owner", "A B"}, 3, `owner "A B"`},
		{"zero lease", []string{"claim", "--db", db, "--owner", "A", "--lease-ms", "0"}, 3, "--lease-ms 0"},
		{"negative clock", []string{"claim", "--db", db, "--owner", "A", "--now-ms", "-5"}, 3, "--now-ms -5"},
		{"clock at -1", []string{"claim", "--db", db, "--owner", "A", "--now-ms", "-1"}, 3, "--now-ms -1"},
		{"free-text note", []string{"redrive", "--db", db, "--id", "o-1", "--note", "it broke"}, 3, `note "it broke"`},
		{"missing file", []string{"stats", "--db", filepath.Join(dir, "nope.db")}, 4, "database file missing"},
		{"not SQLite", []string{"stats", "--db", garbage}, 5, "not a queue database"},
		{"conflicting qty", []string{"enqueue", "--db", db, "--id", "o-1", "--qty", "8"}, 7, "conflict"},
		{"unknown job", []string{"show", "--db", db, "--id", "o-9"}, 8, "job not found"},
		{"redrive pending", []string{"redrive", "--db", db, "--id", "o-1", "--note", "T-1"}, 9, "job is pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(db)
			beforeG, _ := os.ReadFile(garbage)
			r := qc(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit = %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr = %q, want it to mention %q", r.stderr, tc.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing: exit %d prints nothing on stdout", r.stdout, r.code)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n"); lines != 0 && tc.name != "no verb" { // no verb: the usage too
				t.Errorf("stderr has %d lines, want one: %q", lines+1, r.stderr)
			}
			if strings.Contains(r.stderr, "panic") {
				t.Errorf("panicked: %s", r.stderr)
			}
			after, _ := os.ReadFile(db)
			afterG, _ := os.ReadFile(garbage)
			if !bytes.Equal(before, after) || !bytes.Equal(beforeG, afterG) {
				t.Errorf("a refused command changed a file")
			}
			if _, err := os.Stat(filepath.Join(dir, "nope.db")); err == nil {
				t.Errorf("a refused command created nope.db")
			}
		})
	}
}

func TestLockedDatabaseIsBusy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	mustQC(t, "init", "--db", db)
	testbin.HoldLock(t, db)
	r := qc(t, "enqueue", "--db", db, "--id", "o-1", "--qty", "1", "--busy-timeout-ms", "50")
	if r.code != 6 || !strings.Contains(r.stderr, "database busy") {
		t.Fatalf("enqueue on a locked file = exit %d %q, want 6 and 'database busy'", r.code, r.stderr)
	}
}
