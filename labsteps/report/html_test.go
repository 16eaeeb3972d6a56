package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// The HTML report reads in ten seconds: a short title, the score, then
// the failures (blockers once, then each other failure), then the table of
// marks; not judged has its own colour, never the failure's; the
// executables' path is in the footer only, and a grader passes none.
func TestHTMLLeadsWithScoreAndFailures(t *testing.T) {
	step := func(n int, v result.Verdict, checks ...result.Check) result.Result {
		r := result.Result{Step: result.Step{Num: n, Slug: "s", Title: "T", Why: "because"}, Parts: []string{"a: one", "b: two"}, Checks: checks}
		r.Pass = r.Failed() == nil && v == ""
		r.NotJudged = v
		return r
	}
	ok := func(p string) result.Check { return result.Check{What: "fine", OK: true, Part: p} }
	wrong := func(p string) result.Check {
		return result.Check{What: "the ack of " + p, Expected: "200", Observed: "500", Why: "acks matter", Part: p}
	}
	waited := func(p string) result.Check { return result.Check{What: "waited", Part: p, TimedOut: true} }
	rs := []result.Result{step(1, "", ok("a: one"), ok("b: two")), step(2, "", ok("a: one"), wrong("b: two")), step(3, "", ok("a: one"), waited("b: two"))}
	for _, tc := range []struct {
		name string
		rep  report.HTMLReport
		bin  bool
	}{
		{"lab run", report.HTMLReport{Title: "snacklab lab report", Bin: "/home/ann/bin", Results: rs, When: time.Now()}, true},
		{"lab grade", report.HTMLReport{Title: "snacklab grade: ann", Mode: "graded in an isolated container", Results: rs}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := report.WriteHTML(&b, tc.rep); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			order := []string{"<h1>" + tc.rep.Title + "</h1>", `id="score"`, "2 of 3 points", `id="failures"`, "the ack of b: two", `id="steps"`}
			last := -1
			for _, w := range order {
				i := strings.Index(page, w)
				if i < 0 || i < last {
					t.Errorf("%q at %d, want it after %d (order %q)", w, i, last, order)
				}
				last = i
			}
			if strings.Contains(page, `class="part FAIL" title="b: two">b○`) || !strings.Contains(page, `class="part NJ" title="b: two">b○`) {
				t.Errorf("step 3's part b (a wait ran out) is not in the not-judged colour")
			}
			footer := page[strings.Index(page, "<footer"):]
			if tc.bin && (!strings.Contains(footer, tc.rep.Bin) || strings.Count(page, tc.rep.Bin) != 1) {
				t.Errorf("the executables' path is not in the footer alone")
			}
			if tc.rep.Mode != "" && !strings.Contains(footer, tc.rep.Mode) {
				t.Errorf("the footer lacks the mode %q", tc.rep.Mode)
			}
			if i := strings.Index(page, "the ack of b: two"); strings.Count(page[:strings.Index(page, `id="steps"`)], "observed: 500") != 1 || i < 0 {
				t.Errorf("the failure is not shown once before the steps")
			}
		})
	}
}
