package report_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"snacklab/internal/junittest"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// JUnit files must pass the schema Jenkins' xUnit plugin validates against,
// whatever writes them: lab run (WriteJUnit), and lab grade and the isolated
// runner through EncodeJUnit, with suite and per-case properties, failures,
// skips and output.
func TestJUnitValidatesAgainstSchema(t *testing.T) {
	steps := []result.Step{{Num: 1, Slug: "retry", Title: "Retry"}, {Num: 3, Slug: "claim", Title: "Claim"}, {Num: 8, Slug: "crash", Title: "Crash"}}
	pass := result.Result{Step: steps[0], Pass: true, Took: 210 * time.Millisecond, Narrative: "step 1 <ok> & done\n"}
	fail := result.Result{Step: steps[2], Took: 1500 * time.Millisecond, Narrative: "story",
		Checks: []result.Check{{What: "stock +7 once", Expected: "stock=7", Observed: "stock=14", Why: "idempotence"}}}
	broke := result.Result{Step: steps[1], Problem: "time limit of 1m0s reached"}

	var lab bytes.Buffer
	if err := report.WriteJUnit(&lab, []result.Result{pass, fail, broke}, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	var graded bytes.Buffer
	suite := report.JUnitSuite{Name: "ann", Time: 12.5, SystemOut: "2 of 3 passed",
		Props: report.JUnitProperties{{Name: "score", Value: "62.5"}, {Name: "max_score", Value: "100"}},
		Cases: []report.JUnitCase{
			{Name: "step1_retry", Classname: "snacklab.grade.ann", Time: 0.2, SystemOut: "ok",
				Props: report.JUnitProperties{{Name: "points", Value: "12.5"}, {Name: "score", Value: "12.5"}}},
			{Name: "step2_durable", Classname: "snacklab.grade.ann",
				Props:   report.JUnitProperties{{Name: "points", Value: "50"}, {Name: "score", Value: "0"}},
				Failure: &report.JUnitFailure{Message: "flaky: passed 1 of 3 runs", Type: "LabStepFlaky", Text: "detail"}},
			{Name: "step3_claim", Classname: "snacklab.grade.ann", Skipped: &report.JUnitFailure{Message: "not run: build failed"}},
		}}
	empty := report.JUnitSuite{Name: "nobody"}
	if err := report.EncodeJUnit(&graded, suite, empty); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		want []string
	}{
		{"lab run", lab.Bytes(), []string{`tests="3" failures="2" errors="0" skipped="0"`, `time="0.210"`}},
		{"lab grade", graded.Bytes(), []string{`tests="3" failures="1" errors="0" skipped="1"`,
			`<property name="step1_retry.points" value="12.5">`, `<property name="step2_durable.score" value="0">`,
			`<property name="score" value="62.5">`, `name="nobody" tests="0" failures="0" errors="0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			junittest.Validate(t, tc.name, tc.doc)
			for _, w := range tc.want {
				if !strings.Contains(string(tc.doc), w) {
					t.Errorf("JUnit XML lacks %s:\n%s", w, tc.doc)
				}
			}
		})
	}
	if got := len(suite.Props); got != 2 {
		t.Errorf("EncodeJUnit changed its argument: suite has %d properties, want the 2 it was given", got)
	}
}

// The timeline's special drawings, from events alone: a kill is an arrow to
// its target, a jump of the injected clock is a break, real-clock instants
// are shown relative to the step's start, and a summary closes the chart.
func TestTimelineDrawings(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := result.Result{Step: result.Step{Num: 8, Slug: "crash", Title: "Crash"}, Events: []result.Event{
		{At: ms(1), Lane: "harness", Kind: "epoch", Text: "1796079085000", Clock: -1, Section: "a"},
		{At: ms(2), Lane: "A", Kind: "line", Text: "claimed o-1 token 1 (lease_until 1796079085250)", Clock: 10000, Section: "a"},
		{At: ms(3), Lane: "harness", Kind: "kill", Text: "SIGKILL A", Clock: 10000, Section: "a", Bad: true},
		{At: ms(4), Lane: "B", Kind: "start", Text: "start B", Clock: 39999, Section: "a"},
		{At: ms(5), Lane: "harness", Kind: "summary", Text: "stock +7 once", Clock: -1, Section: "a"},
		{At: ms(6), Lane: "queuectl", Kind: "start", Text: "start enqueue", Clock: 10000, Section: "b"},
		{At: ms(7), Lane: "harness", Kind: "kill", Text: "SIGKILL enqueue", Clock: 10000, Section: "b", Bad: true},
	}}
	tl := report.Timelines(r)
	if len(tl) != 2 {
		t.Fatalf("expected two timelines; observed %d", len(tl))
	}
	if svg := string(tl[1].SVG); !strings.Contains(svg, `data-kind="kill" data-target="queuectl"`) {
		t.Errorf("a kill of a process named otherwise than its lane should point at its lane (queuectl):\n%s", svg)
	}
	svg := string(tl[0].SVG)
	for _, want := range []string{
		`data-kind="kill" data-target="A"`,
		`the injected clock moves on 29 999 ms (t=10000 → t=39999)`,
		`lease_until @250 ms`,
		`class="summary"`, `✓ stock +7 once`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("timeline lacks %s:\n%s", want, svg)
		}
	}
	for _, unwanted := range []string{"1796079085250", ">1796079085000<", `path class="ev bad" data-kind="kill"`} {
		if strings.Contains(svg, unwanted) {
			t.Errorf("timeline shows %s:\n%s", unwanted, svg)
		}
	}
}

// Only the newest contract is graded, so every report says which one it
// graded against: an implementation written to an earlier text then knows
// to read CONTRACT.md's changelog.
func TestReportsPrintTheContractVersion(t *testing.T) {
	rs := []result.Result{{Step: result.Step{Num: 1, Slug: "retry", Title: "Retry"}, Pass: true}}
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{"JUnit", func(b *bytes.Buffer) error { return report.WriteJUnit(b, rs, time.Second) },
			fmt.Sprintf(`<property name="contract_version" value="%d">`, result.ContractVersion)},
		{"JUnit of a cohort", func(b *bytes.Buffer) error { return report.EncodeJUnit(b, report.JUnitSuite{Name: "ann"}) },
			fmt.Sprintf(`<property name="contract_version" value="%d">`, result.ContractVersion)},
		{"Gradescope", func(b *bytes.Buffer) error { return report.WriteGradescope(b, rs, time.Second) }, result.ContractText},
		{"HTML", func(b *bytes.Buffer) error {
			return report.WriteHTML(b, report.HTMLReport{Title: "t", Results: rs})
		}, "graded against " + result.ContractText},
		{"results", func(b *bytes.Buffer) error { return result.Encode(b, rs) }, fmt.Sprintf(`"contract": %d`, result.ContractVersion)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); !strings.Contains(got, tc.want) {
				t.Errorf("%s report lacks %q:\n%s", tc.name, tc.want, got)
			}
		})
	}
}
