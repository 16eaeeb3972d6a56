package starter_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/starter"
	"snacklab/labsteps"
)

// run fakes one lab run: steps in fail fail on a check that observed obs[n]
// (or on a harness problem when obs[n] is "problem"); the rest pass.
func run(fail map[int]string) []labsteps.Result {
	var out []labsteps.Result
	for _, s := range labsteps.Steps() {
		r := labsteps.Result{Step: s, Pass: true, Checks: []labsteps.Check{{What: "a check", OK: true}}}
		if obs, ok := fail[s.Num]; ok {
			r.Pass = false
			if obs == "problem" {
				r.Problem = "time limit of 1m0s reached"
			} else {
				r.Checks = append(r.Checks, labsteps.Check{What: "the check that bites", Observed: obs})
			}
		}
		out = append(out, r)
	}
	return out
}

func TestJudge(t *testing.T) {
	all := map[int]string{}
	for n := 1; n <= 8; n++ {
		all[n] = "exit 1 (stderr: claim: not implemented (queue/queue.go: Claim))"
	}
	every := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		name   string
		out    starter.Outcome
		runs   [][]labsteps.Result
		ok     bool
		passed int
		result string // of the first row
		also   string
	}{
		{"reference passes", starter.Outcome{Kind: starter.KindReference, Steps: every},
			[][]labsteps.Result{run(nil), run(nil)}, true, 8, "passed 2/2", ""},
		{"reference fails once", starter.Outcome{Kind: starter.KindReference, Steps: every},
			[][]labsteps.Result{run(nil), run(map[int]string{1: "x"})}, false, 7, "passed 1/2", ""},
		{"starter says not implemented", starter.Outcome{Kind: starter.KindStarter, Steps: every},
			[][]labsteps.Result{run(all)}, true, 0, "not implemented 1/1", ""},
		{"starter fails without saying why", starter.Outcome{Kind: starter.KindStarter, Steps: every},
			[][]labsteps.Result{run(map[int]string{1: "exit 1", 2: "x", 3: "x", 4: "x", 5: "x", 6: "x", 7: "x", 8: "x"})}, false, 0, "not implemented 0/1", ""},
		{"mutant rejected", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3, 8}},
			[][]labsteps.Result{run(map[int]string{3: "x", 7: "y", 8: "z"}), run(map[int]string{3: "x", 8: "z"})}, true, 5, "rejected 2/2", "7"},
		{"mutant rejected by luck", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}},
			[][]labsteps.Result{run(map[int]string{3: "x"}), run(nil)}, false, 7, "rejected 1/2", ""},
		{"a harness problem is no rejection", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}},
			[][]labsteps.Result{run(map[int]string{3: "problem"})}, false, 7, "rejected 0/1", ""},
		{"no run at all", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}}, nil, false, 0, "rejected 0/0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out
			starter.Judge(&out, tc.runs)
			also := fmtInts(out.Also)
			if out.OK != tc.ok || out.Passed != tc.passed || out.Rows[0].Result != tc.result || also != tc.also {
				t.Errorf("judge: ok=%v passed=%d first row %q also %q; want ok=%v passed=%d %q also %q",
					out.OK, out.Passed, out.Rows[0].Result, also, tc.ok, tc.passed, tc.result, tc.also)
			}
			for _, r := range out.Rows {
				if !r.OK && tc.runs != nil && r.Detail == "" {
					t.Errorf("step %d not as expected but no detail", r.Step)
				}
			}
		})
	}
}

func fmtInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func TestWriteTable(t *testing.T) {
	every := []int{1, 2, 3, 4, 5, 6, 7, 8}
	rep := &starter.SelftestReport{
		Reference: starter.Outcome{Name: "reference", Kind: starter.KindReference, Steps: every},
		Starter:   starter.Outcome{Name: "starter", Kind: starter.KindStarter, Steps: every},
		Mutants: []starter.Outcome{
			{Name: "expiry-boundary", Kind: starter.KindMutant, Steps: []int{3, 8}, Comment: "Claims a tick late."},
			{Name: "lucky", Kind: starter.KindMutant, Steps: []int{5}, Comment: "Passes."},
		},
		Summary: "selftest: 1/2 mutants rejected, reference 8/8, starter 0/8",
	}
	starter.Judge(&rep.Reference, [][]labsteps.Result{run(nil)})
	not := map[int]string{}
	for n := 1; n <= 8; n++ {
		not[n] = "not implemented"
	}
	starter.Judge(&rep.Starter, [][]labsteps.Result{run(not)})
	starter.Judge(&rep.Mutants[0], [][]labsteps.Result{run(map[int]string{3: "x", 7: "y", 8: "z"})})
	starter.Judge(&rep.Mutants[1], [][]labsteps.Result{run(nil)})
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"TARGET", "ALSO FAILS",
		"reference        1-8   pass             8/8 as expected",
		"starter          1-8   not implemented  8/8 as expected",
		"expiry-boundary  3     reject           rejected 1/1      7           Claims a tick late.",
		"expiry-boundary  8     reject           rejected 1/1      7",
		"lucky            5     reject           NOT rejected 0/1  -           Passes.",
		"lucky, step 5: want reject, got rejected 0/1:\n    step 5 passed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "\nselftest: 1/2 mutants rejected, reference 8/8, starter 0/8\n") {
		t.Errorf("the table does not end with the summary line:\n%s", out)
	}
}
