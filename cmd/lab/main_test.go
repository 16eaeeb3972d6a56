package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"snacklab/internal/chromiumtest"
)

// bin holds the lab and the reference's three executables, built once.
var bin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "snacklab-cmd-lab-test-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "bin")
		cmd := exec.Command("go", "build", "-o", bin+"/", "./cmd/lab", "./cmd/queuectl", "./cmd/sender", "./cmd/receiver")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

type result struct {
	code           int
	stdout, stderr string
}

func lab(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "lab"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("lab %s: %v", strings.Join(args, " "), err)
	}
	return r
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"step out of range", []string{"run", "9"}, 2, "lab: step \"9\": want a number from 1 to 8 or a name (retry, durable, claim, finish, redrive, run-once, race, crash), a range like 3-5 or claim-redrive, or a list like 1,4. Try: lab run 8, or lab run crash\n"},
		{"backwards range", []string{"5-3"}, 2, "lab: step \"5-3\": want a number from 1 to 8 or a name (retry, durable, claim, finish, redrive, run-once, race, crash), a range like 3-5 or claim-redrive, or a list like 1,4. Try: lab run 8, or lab run crash\n"},
		{"unknown flag", []string{"run", "--frobnicate"}, 2, "lab: flag provided but not defined: -frobnicate. Try: lab help\n"},
		{"missing executables", []string{"run", "--bin", "/nonexistent", "1"}, 2, "lab: queuectl: stat /nonexistent/queuectl: no such file or directory (build it, or point --bin at a directory holding queuectl, sender and receiver)\n"},
		{"repeat zero", []string{"run", "--repeat", "0"}, 2, "lab: --repeat must be at least 1. Try: lab run --repeat 200\n"},
		{"judged gid alone", []string{"run", "--judged-gid", "5", "1"}, 2, "lab: --judged-gid needs --judged-uid. Try: lab run --judged-uid 300000\n"},
		{"judged as root", []string{"run", "--judged-uid", "0", "1"}, 2, "lab: --judged-uid 0: want a non-root uid. Try: lab run --judged-uid 300000\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lab(t, tc.args...)
			if r.code != tc.code || r.stderr != tc.stderr {
				t.Errorf("lab %s: exit %d, stderr %q; want exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.stderr)
			}
		})
	}
	if r := lab(t, "help"); r.code != 0 || !strings.Contains(r.stdout, "-results file") {
		t.Errorf("lab help: exit %d, stdout %q", r.code, r.stdout)
	}
}

// A broken implementation fails with exit 1 and a message a learner can act on.
func TestFailureSaysExpectedObservedWhyAndLogs(t *testing.T) {
	broken := t.TempDir()
	for _, p := range []string{"sender", "receiver"} {
		if err := os.Symlink(filepath.Join(bin, p), filepath.Join(broken, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(broken, "queuectl"), []byte("#!/bin/sh\necho 'queuectl: not written yet' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		// The summary: the step's marks, the score, and what blocks its
		// parts (queuectl's verbs do not succeed) once, with its replay.
		{nil, []string{"✗ 1 retry", "score: 0 of 12.5 points", "blocked by: `queuectl ", "expected exit 0, observed exit 1 (stderr: queuectl: not written yet)",
			"replay:   " + filepath.Join(bin, "lab") + " run --bin " + broken + " -v 1", "0/1 steps passed"}},
		// -v: today's story, every failure in full.
		{[]string{"-v"}, []string{"FAIL  1 retry", "expected: exit 0", "observed: exit 1 (stderr: queuectl: not written yet)", "why:", "logs:", "0/1 steps passed"}},
	} {
		r := lab(t, append([]string{"run", "--bin", broken, "--work", t.TempDir(), "1"}, tc.flags...)...)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("lab run %v: stdout lacks %q:\n%s", tc.flags, want, r.stdout)
			}
		}
	}
}

// Step 8 with every report; the HTML is then opened in headless Chromium.
func TestReportsAndTimelineInChromium(t *testing.T) {
	dir := t.TempDir()
	html, results, junit := filepath.Join(dir, "report.html"), filepath.Join(dir, "results.json"), filepath.Join(dir, "junit.xml")
	r := lab(t, "8", "--results", results, "--junit", junit, "--html", html) // --bin defaults to the lab's own dir
	if r.code != 0 || !strings.Contains(r.stdout, "✓ 8 crash") || !strings.Contains(r.stdout, "1/1 steps passed") {
		t.Fatalf("lab 8: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var gs struct {
		Score float64 `json:"score"`
		Tests []struct {
			Number string `json:"number"`
			Status string `json:"status"`
		} `json:"tests"`
	}
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	// One test per part of step 8 (a–c), its one point split among them.
	if err := json.Unmarshal(b, &gs); err != nil || gs.Score != 1 || len(gs.Tests) != 3 || gs.Tests[0].Number != "8.a" || gs.Tests[0].Status != "passed" {
		t.Errorf("results.json: %v %+v", err, gs)
	}
	if b, err := os.ReadFile(junit); err != nil || !bytes.Contains(b, []byte(`<testcase name="step8_crash_a"`)) {
		t.Errorf("junit.xml: %v\n%s", err, b)
	}

	ctx := chromiumtest.New(t, 1300, 3*time.Minute)
	type shown struct {
		Timelines int      `json:"timelines"`
		Sections  []string `json:"sections"`
		Marks     int      `json:"marks"`
		Crosses   int      `json:"crosses"`
		Width     float64  `json:"width"`
		Text      string   `json:"text"`
		Verdict   string   `json:"verdict"`
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+html), chromedp.WaitVisible(chromedp.CSS("#timelines-step8 svg.timeline"))); err != nil {
		t.Fatalf("chromium: open the report: %v", err)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[shown](`(() => {
		const s = document.querySelector('#timelines-step8');
		const svgs = [...s.querySelectorAll('svg.timeline')];
		return {
			timelines: svgs.length,
			sections: [...s.querySelectorAll('h3')].map(h => h.textContent),
			marks: s.querySelectorAll('svg.timeline circle').length,
			crosses: s.querySelectorAll('svg.timeline path[data-kind]').length,
			width: svgs.length ? svgs[0].getBoundingClientRect().width : 0,
			text: svgs.map(x => x.textContent).join('\n'),
			verdict: document.querySelector('#step-8 td').textContent.trim(),
		};
	})()`))
	if err != nil {
		t.Fatalf("chromium: read the report: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	if p := os.Getenv("SNACKLAB_SCREENSHOT"); p != "" {
		os.WriteFile(p, shot, 0o644)
	}
	// Read in ten seconds at a desk and on a phone: the score first, a short
	// title, and nothing wider than the page at 400 px but the timelines'
	// own scrolling boxes.
	type lead struct {
		Title    string  `json:"title"`
		Score    string  `json:"score"`
		ScoreTop float64 `json:"scoreTop"`
		StepsTop float64 `json:"stepsTop"`
	}
	for _, width := range []int64{1280, 400} {
		g := chromiumtest.At(t, ctx, width, "report") // report-1280.png, report-400.png
		got, err := chromedp.Run(ctx, chromedp.Evaluate[lead](`(() => ({
			title: document.querySelector('h1').textContent,
			score: document.querySelector('#score').textContent,
			scoreTop: document.querySelector('#score').getBoundingClientRect().top,
			stepsTop: document.querySelector('#steps').getBoundingClientRect().top,
		}))()`))
		if err != nil {
			t.Fatalf("chromium: %d px: %v", width, err)
		}
		if got.Title != "snacklab lab report" || !strings.HasPrefix(got.Score, "12.5 of 12.5 points") || got.ScoreTop > got.StepsTop || g.Overflow > 0 {
			t.Errorf("%d px: title %q, score %q at %.0f (the steps at %.0f), %.0f px wider than the page; want the short title, 12.5 of 12.5 points first, nothing wider",
				width, got.Title, got.Score, got.ScoreTop, got.StepsTop, g.Overflow)
		}
	}
	if page.Verdict != "PASS" || page.Timelines != 3 || page.Marks < 30 || page.Crosses < 2 || page.Width < 600 {
		t.Errorf("rendered report: verdict %q, %d timelines (want 3) %v, %d marks, %d crosses, width %.0f",
			page.Verdict, page.Timelines, page.Sections, page.Marks, page.Crosses, page.Width)
	}
	if got := strings.Join(page.Sections, " | "); !strings.HasPrefix(got, "a: ") || !strings.Contains(got, " | b: ") || !strings.Contains(got, " | c: ") ||
		strings.Index(got, "b: ") > strings.Index(got, "c: ") {
		t.Errorf("timeline sections %q, want a, b, c in order", got)
	}
	for _, want := range []string{"start A", "claimed o-1 token 1", "A: exit 73", "(committed; response held)", "SIGKILL A", "A: killed (SIGKILL)",
		"nothing claimable", "claimed o-1 token 2", "(no stock change)", "finish o-1 token 1 ok → not applied (exit 12)"} {
		if !strings.Contains(page.Text, want) {
			t.Errorf("the rendered timeline lacks %q", want)
		}
	}
}
