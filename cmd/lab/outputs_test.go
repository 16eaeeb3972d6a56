package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Report paths that cannot be written are refused before any step runs
// (exit 2, nothing printed on stdout), and unknown step names say which
// names there are.
func TestRefusedBeforeRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notResults := filepath.Join(dir, "results.json") // Gradescope's, given to --last by mistake: never replaced
	if err := os.WriteFile(notResults, []byte(`{"score":1,"tests":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"results in a missing dir", []string{"--results", "/nonexistent/r.json"}, "--results /nonexistent/r.json: directory /nonexistent does not exist"},
		{"junit in a missing dir", []string{"8", "--junit", filepath.Join(dir, "no", "j.xml")}, "does not exist; create it or choose another path. Nothing was run"},
		{"html under a file", []string{"--html", filepath.Join(file, "r.html")}, "does not exist"},
		{"html is a directory", []string{"--html", dir}, "is a directory; want a file path"},
		// A device is taken as it is (the isolated runner passes --results /dev/stderr): the
		// refusal is of --junit, the next path checked.
		{"results on a device", []string{"--results", "/dev/stderr", "--junit", "/nonexistent/j.xml"}, "--junit /nonexistent/j.xml: directory /nonexistent does not exist"},
		{"last in a missing dir", []string{"--last", "/nonexistent/last.json"}, "--last /nonexistent/last.json: directory /nonexistent does not exist"},
		{"last is not the lab's results", []string{"--last", notResults}, "not the lab's results"},
		{"unknown step name", []string{"crsh"}, `step "crsh": want a number from 1 to 8 or a name (retry, durable, claim, finish, redrive, run-once, race, crash)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lab(t, tc.args...)
			if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("lab %s: expected exit 2, no step run (empty stdout) and stderr with %q; observed exit %d, stdout %q, stderr %q",
					strings.Join(tc.args, " "), tc.stderr, r.code, r.stdout, r.stderr)
			}
		})
	}
	if b, err := os.ReadFile(notResults); err != nil || string(b) != `{"score":1,"tests":[]}` {
		t.Errorf("--last %s refused, yet the file is now %q (%v)", notResults, b, err)
	}
}
