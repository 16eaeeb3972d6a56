package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelCommand: lab model passes the reference (exit 0), fails a queue
// whose finish claims success for a stale token (exit 1, with the shrunk
// commands and the clause, as text and as --json), and refuses bad flags
// (exit 2).
func TestModelCommand(t *testing.T) {
	if r := lab(t, "model", "--bin", bin, "--seeds", "2", "--ops", "20"); r.code != 0 || !strings.Contains(r.stdout, "matched the model on 2 sequences") {
		t.Fatalf("reference: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	wrong := t.TempDir()
	script := "#!/bin/sh\n\"" + filepath.Join(bin, "queuectl") + "\" \"$@\"; rc=$?\n[ \"$1\" = finish ] && [ $rc = 12 ] && exit 0\nexit $rc\n"
	if err := os.WriteFile(filepath.Join(wrong, "queuectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := lab(t, "model", "--bin", wrong, "--seeds", "3", "--ops", "20")
	if r.code != 1 || !strings.Contains(r.stdout, "queuectl finish --db q.db") || !strings.Contains(r.stdout, "clause:    §2.finish.") {
		t.Fatalf("stale finish: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = lab(t, "model", "--bin", wrong, "--seeds", "3", "--ops", "20", "--json")
	var v struct {
		OK       bool     `json:"ok"`
		Commands []string `json:"commands"`
		Op       string   `json:"operation"`
		Clause   string   `json:"clause"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 1 || v.OK || v.Op != "finish" || len(v.Commands) > 5 || !strings.HasPrefix(v.Clause, "§2.finish.") {
		t.Fatalf("--json: exit %d, %+v (%v), stdout %q", r.code, v, err, r.stdout)
	}

	for _, args := range [][]string{
		{"model", "--bin", bin, "--ops", "0"},
		{"model", "--bin", bin, "extra"},
		{"model", "--bin", t.TempDir()},
		{"model", "--frobnicate"},
	} {
		if r := lab(t, args...); r.code != 2 || !strings.HasPrefix(r.stderr, "lab: model: ") {
			t.Errorf("lab %s: exit %d, stderr %q; want exit 2", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
