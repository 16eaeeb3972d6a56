package report_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// The summary names what blocks many parts once, from what the program
// answered ("not implemented", or a setup command several parts share
// that did not succeed), lists the blocked parts under it, shows every
// other failure once with its replay command, and counts progress against
// the last run.
func TestSummaryBlockersFailuresProgress(t *testing.T) {
	notImpl := "exit 1 (stderr: queuectl: enqueue: enqueue o-1: not implemented (queue/queue.go: Enqueue))"
	setup := func(part, observed string) result.Check {
		return result.Check{What: "`queuectl enqueue --db q.db --id o-1` succeeds", Expected: "exit 0", Observed: observed, Part: part}
	}
	ok := func(part string) result.Check { return result.Check{What: "fine", OK: true, Part: part} }
	wrong := func(part string) result.Check {
		return result.Check{What: "ack", Expected: "200", Observed: "500 in " + part, Why: "because", Clause: []string{"§5.ack"}, Part: part}
	}
	step := func(n int, checks ...result.Check) result.Result {
		r := result.Result{Step: result.Step{Num: n, Slug: "s", Title: "T"}, Parts: []string{"a: one", "b: two", "c: three"}, Checks: checks}
		r.Pass = r.Failed() == nil
		return r
	}
	for _, tc := range []struct {
		name     string
		results  []result.Result
		last     []result.Result
		blockers []string // label — first: parts
		failures []string // step part
		progress string
	}{
		{"not implemented blocks every part it stops",
			[]result.Result{step(1, setup("a: one", notImpl), ok("b: two"), setup("c: three", notImpl)), step(2, setup("a: one", notImpl), wrong("b: two"), ok("c: three"))},
			nil,
			[]string{"Enqueue is not implemented (queue/queue.go) — 1 a: 1.a 1.c 2.a"}, []string{"2 b"}, ""},
		{"a setup command that fails in several parts blocks them",
			[]result.Result{step(3, setup("a: one", "exit 4 (stderr: bad)"), setup("b: two", "exit 4"), wrong("c: three"))},
			nil,
			[]string{"`queuectl enqueue` does not succeed (exit 4) — 3 a: 3.a 3.b"}, []string{"3 c"}, ""},
		{"the program's answer quoted in the check's why",
			[]result.Result{step(6, result.Check{What: "the request", Expected: "POST /orders", Observed: "", Why: "the URL (the sender: exit 1 (stderr: sender: run-once: not implemented (sender/sender.go: RunOnce)))", Part: "a: one"}, ok("b: two"), ok("c: three"))},
			nil,
			[]string{"RunOnce is not implemented (sender/sender.go) — 6 a: 6.a"}, nil, ""},
		{"one setup failure is the part's own",
			[]result.Result{step(3, setup("a: one", "exit 4"), ok("b: two"), wrong("c: three"))},
			nil, nil, []string{"3 a", "3 c"}, ""},
		{"progress: a part passes that did not",
			[]result.Result{step(3, ok("a: one"), ok("b: two"), wrong("c: three"))},
			[]result.Result{step(3, ok("a: one"), wrong("b: two"), wrong("c: three"))},
			nil, []string{"3 c"}, "progress: 1 more part(s) pass than in your last run (marked +: 3.b)"},
		{"progress: a part fails that passed",
			[]result.Result{step(3, ok("a: one"), wrong("b: two"), wrong("c: three"))},
			[]result.Result{step(3, ok("a: one"), ok("b: two"), wrong("c: three"))},
			nil, []string{"3 b", "3 c"}, "progress: 1 fewer part(s) pass than in your last run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := report.Summarize(tc.results, nil, report.Scheme{}, tc.last)
			var got []string
			for _, b := range s.Blockers {
				got = append(got, b.Label+" — "+b.First+": "+strings.Join(b.Parts, " "))
			}
			if g, w := strings.Join(got, "\n"), strings.Join(tc.blockers, "\n"); g != w {
				t.Errorf("blockers:\n%s\nwant:\n%s", g, w)
			}
			got = nil
			for _, f := range s.Failures {
				got = append(got, strings.TrimSpace(strings.Join([]string{itoa(f.Step.Num), f.Part.ID}, " ")))
			}
			if g, w := strings.Join(got, ","), strings.Join(tc.failures, ","); g != w {
				t.Errorf("failures %s, want %s", g, w)
			}
			var b strings.Builder
			s.Write(&b, func(n int) string { return "lab run -v " + itoa(n) })
			out := b.String()
			if tc.progress != "" && !strings.Contains(out, tc.progress) {
				t.Errorf("lacks %q:\n%s", tc.progress, out)
			}
			if tc.last == nil && strings.Contains(out, "progress:") {
				t.Errorf("progress without a last run:\n%s", out)
			}
			for _, f := range s.Failures {
				for _, c := range f.Checks {
					if n := strings.Count(out, "observed: "+c.Observed); n != 1 {
						t.Errorf("failure %q shown %d times, want once:\n%s", c.What, n, out)
					}
				}
				if !strings.Contains(out, "replay:   lab run -v "+itoa(f.Step.Num)) {
					t.Errorf("no replay command for step %d:\n%s", f.Step.Num, out)
				}
			}
		})
	}
}

// Marks: passed, failed and not judged each have their own.
func TestMarksDistinct(t *testing.T) {
	seen := map[string]result.Verdict{}
	for _, v := range []result.Verdict{result.Pass, result.Fail, result.Timeout} {
		m := report.Mark(v)
		if w, dup := seen[m]; dup {
			t.Errorf("%s and %s share the mark %q", v, w, m)
		}
		seen[m] = v
	}
	for _, v := range []result.Verdict{result.Interrupted, result.Error} {
		if got, want := report.Mark(v), report.Mark(result.Timeout); got != want {
			t.Errorf("mark of %s = %q, want the not-judged mark %q", v, got, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// docs/grading.md's table of default weights is DefaultWeights, row for
// row, and a part with weight 0 scores nothing while its step's other
// parts share the step's points.
func TestWeightsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "grading.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+\.[a-z]+) \| ([0-9.]+) \|`)
	doc := map[string]float64{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		x, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		doc[m[1]] = x
	}
	if got, want := doc, report.DefaultWeights(); !maps.Equal(got, want) {
		t.Errorf("docs/grading.md's default weights %v, want %v", got, want)
	}
	step := result.Step{Num: 1, Slug: "retry"}
	r := result.Result{Step: step, Parts: []string{"a: x", "b: y", "c: z", "d: w", "e: help"}, Pass: true}
	ps := report.ScoreRuns(step, []result.Result{r}, 12, report.Scheme{})
	for _, tc := range []struct {
		id   string
		want float64
	}{{"a", 3}, {"d", 3}, {"e", 0}} {
		for _, p := range ps {
			if p.ID == tc.id && p.Points != tc.want {
				t.Errorf("part %s: %v points, want %v", tc.id, p.Points, tc.want)
			}
		}
	}
	ps = report.ScoreRuns(step, []result.Result{r}, 10, report.Scheme{Weights: map[string]float64{"1.e": 1}})
	if got, want := ps[4].Points, 2.0; got != want {
		t.Errorf("--points 1.e=1: part e has %v points, want %v", got, want)
	}
}
