package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/tier"
)

// `lab starter` writes a learner's copy that builds and vets, and whose lab
// fails every step saying what is not implemented; it refuses to write into
// a directory that holds anything.
func TestStarter(t *testing.T) {
	tier.Slow(t)
	out := filepath.Join(t.TempDir(), "copy")
	r := lab(t, "starter", "--out", out)
	if r.code != 0 {
		t.Fatalf("lab starter: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"starter: wrote ", "queue/queue.go:", "(*Queue).Claim", "1. backoff ", "8. run-once ",
		"→ steps 1 retry, 3 claim, 4 finish can pass", "left out:", "labsteps/mutants/", "next: cd " + out + " && ./run-lab.sh"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("lab starter's report lacks %q:\n%s", want, r.stdout)
		}
	}
	before, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	again := lab(t, "starter", "--out", out)
	if again.code != 2 || !strings.Contains(again.stderr, "is not empty") || !strings.Contains(again.stderr, "nothing written") {
		t.Errorf("lab starter into a non-empty dir: exit %d, stderr %q; want exit 2 saying it is not empty", again.code, again.stderr)
	}
	if after, _ := os.ReadDir(out); len(after) != len(before) {
		t.Errorf("the refused run changed the dir: %d entries, then %d", len(before), len(after))
	}

	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the learner's copy: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	goCmd("build", "./...")
	goCmd("vet", "./...")

	run := exec.Command("./run-lab.sh", "--work", t.TempDir())
	run.Dir = out
	stdout, err := run.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("run-lab.sh in the learner's copy: %v, want exit 1\n%s", err, stdout)
	}
	// Each step fails, and the summary leads with the first cause: what is
	// not implemented, and where, once, with the parts it blocks under it
	// (every step has some); the whole fits a screen.
	text := string(stdout)
	if n := len(regexp.MustCompile(`(?m)^✗ \d [a-z-]+ +\d+\.\d+s`).FindAllString(text, -1)); n != 8 || !strings.Contains(text, "0/8 steps passed") {
		t.Fatalf("want 8 failed steps (%d ✗ lines):\n%s", n, text)
	}
	// The parts the starter passes before any TODO is written carry no
	// points (report.DefaultWeights).
	if !strings.Contains(text, "score: 0 of 100 points") {
		t.Errorf("the starter scores more than 0:\n%s", text)
	}
	first := regexp.MustCompile(`(?m)^blocked by: .*$`).FindString(text)
	if !regexp.MustCompile(`^blocked by: \w+ is not implemented \((queue/queue|sender/sender|receiver/receiver)\.go\) — step \d [a-z]`).MatchString(first) {
		t.Errorf("the first blocker is %q, want what is not implemented and the step and part it was first seen in:\n%s", first, text)
	}
	blocked := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  blocks \d+ part\(s\): (.*)$`).FindAllStringSubmatch(text, -1) {
		for _, g := range strings.Split(m[1], " · ") {
			blocked[strings.Fields(g)[0]] = true
		}
	}
	for n := 1; n <= 8; n++ {
		if !blocked[strconv.Itoa(n)] {
			t.Errorf("no part of step %d is listed under a blocker:\n%s", n, text)
		}
	}
	if before, _, _ := strings.Cut(text, "steps passed"); strings.Count(before, "\n") > 60 {
		t.Errorf("%d lines before the summary line, want at most 60:\n%s", strings.Count(before, "\n"), text)
	}
}

func TestSelftestUsage(t *testing.T) {
	for _, args := range [][]string{{"selftest", "--repeat", "0"}, {"selftest", "--frobnicate"}, {"starter"}, {"starter", "--out", "x", "y"}} {
		if r := lab(t, args...); r.code != 2 || !strings.Contains(r.stderr, "Try: lab ") {
			t.Errorf("lab %s: exit %d, stderr %q; want exit 2 with a Try: hint", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := lab(t, "selftest", "-h"); r.code != 0 || !strings.Contains(r.stdout, "selftest: N/N mutants rejected") {
		t.Errorf("lab selftest -h: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := lab(t, "selftest", "no-such-mutant"); r.code != 1 || !strings.Contains(r.stderr, `no mutant or variant "no-such-mutant"`) {
		t.Errorf("lab selftest no-such-mutant: exit %d, stderr %q", r.code, r.stderr)
	}
}
