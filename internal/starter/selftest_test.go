package starter_test

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/starter"
	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/result"
)

// run fakes one lab run: steps in fail fail on a check of clause §2.claim.due
// that observed obs[n] (or on a harness problem when obs[n] is "problem");
// the rest pass.
func run(fail map[int]string) []result.Result {
	var out []result.Result
	for _, s := range labsteps.Steps() {
		r := result.Result{Step: s.Step, Pass: true, Checks: []result.Check{{What: "a check", OK: true}}}
		if obs, ok := fail[s.Num]; ok {
			r.Pass = false
			if obs == "problem" {
				r.Problem = "time limit of 1m0s reached"
			} else {
				r.Checks = append(r.Checks, result.Check{What: "the check that bites", Observed: obs, Clause: []string{"§2.claim.due"}})
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
	due := []string{"§2.claim.order", "§2.claim.due"}
	for _, tc := range []struct {
		name   string
		out    starter.Outcome
		runs   [][]result.Result
		ok     bool
		passed int
		result string // of the first row
		also   string
	}{
		{"reference passes", starter.Outcome{Kind: starter.KindReference, Steps: every},
			[][]result.Result{run(nil), run(nil)}, true, 8, "passed 2/2", ""},
		{"reference fails once", starter.Outcome{Kind: starter.KindReference, Steps: every},
			[][]result.Result{run(nil), run(map[int]string{1: "x"})}, false, 7, "passed 1/2", ""},
		{"starter says not implemented", starter.Outcome{Kind: starter.KindStarter, Steps: every},
			[][]result.Result{run(all)}, true, 0, "not implemented 1/1", ""},
		{"starter fails without saying why", starter.Outcome{Kind: starter.KindStarter, Steps: every},
			[][]result.Result{run(map[int]string{1: "exit 1", 2: "x", 3: "x", 4: "x", 5: "x", 6: "x", 7: "x", 8: "x"})}, false, 0, "not implemented 0/1", ""},
		{"mutant rejected", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3, 8}, Clauses: due},
			[][]result.Result{run(map[int]string{3: "x", 7: "y", 8: "z"}), run(map[int]string{3: "x", 8: "z"})}, true, 5, "rejected 2/2", "7"},
		{"mutant rejected by luck", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}, Clauses: due},
			[][]result.Result{run(map[int]string{3: "x"}), run(nil)}, false, 7, "rejected 1/2", ""},
		{"a harness problem is no rejection", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}, Clauses: due},
			[][]result.Result{run(map[int]string{3: "problem"})}, false, 7, "rejected 0/1", ""},
		{"a failed check of another clause is no rejection", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}, Clauses: []string{"§2.claim.order"}},
			[][]result.Result{run(map[int]string{3: "x"})}, false, 7, "rejected 0/1", ""},
		{"a later part's failure on the mutant's clause counts", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}, Clauses: []string{"§2.claim.order"}},
			[][]result.Result{twoParts()}, true, 7, "rejected 1/1", ""},
		{"no run at all", starter.Outcome{Kind: starter.KindMutant, Steps: []int{3}, Clauses: due}, nil, false, 0, "rejected 0/0", ""},
		{"variant passes every step", starter.Outcome{Kind: starter.KindVariant, Steps: every, Clauses: due},
			[][]result.Result{run(nil)}, true, 8, "passed 1/1", ""},
		{"variant fails a step", starter.Outcome{Kind: starter.KindVariant, Steps: every, Clauses: due},
			[][]result.Result{run(map[int]string{6: "x"})}, false, 7, "passed 1/1", ""},
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

// twoParts is a run whose step 3 failed in two parts: first on a check of
// §2.claim.due, then on one of §2.claim.order.
func twoParts() []result.Result {
	rs := run(map[int]string{3: "x"})
	for i := range rs {
		if rs[i].Step.Num == 3 {
			rs[i].Checks = append(rs[i].Checks, result.Check{What: "claim order", Clause: []string{"§2.claim.order"}})
		}
	}
	return rs
}

// squeeze makes every run of spaces one: the table's padding depends on
// its widest cell.
func squeeze(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }

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
			{Name: "expiry-boundary", Kind: starter.KindMutant, Steps: []int{3, 8}, Clauses: []string{"§2.claim.due"}, Comment: "Claims a tick late."},
			{Name: "lucky", Kind: starter.KindMutant, Steps: []int{5}, Clauses: []string{"§2.claim.due"}, Comment: "Passes."},
		},
		Variants: []starter.Outcome{
			{Name: "newest-first", Kind: starter.KindVariant, Steps: every, Clauses: []string{"§3.show.history"}, Comment: "Lists newest first."},
			{Name: "own-wording", Kind: starter.KindVariant, Steps: every, Clauses: []string{"§3.stderr"}, Comment: "Words it its way."},
		},
		Summary:  "selftest: 1/2 mutants rejected, 1/2 variants passed, reference 8/8, starter 0/8",
		AllSteps: true,
	}
	starter.Judge(&rep.Reference, [][]result.Result{run(nil)})
	not := map[int]string{}
	for n := 1; n <= 8; n++ {
		not[n] = "not implemented"
	}
	starter.Judge(&rep.Starter, [][]result.Result{run(not)})
	starter.Judge(&rep.Mutants[0], [][]result.Result{run(map[int]string{3: "x", 7: "y", 8: "z"})})
	starter.Judge(&rep.Mutants[1], [][]result.Result{run(nil)})
	starter.Judge(&rep.Variants[0], [][]result.Result{run(nil)})
	starter.Judge(&rep.Variants[1], [][]result.Result{run(map[int]string{6: "x"})})
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
		"newest-first     1-8   pass             8/8 as expected               Lists newest first.",
		"own-wording      1-8   pass             7/8 as expected; NOT: steps 6",
		"own-wording, step 6: want pass, got passed 0/1:",
	} {
		if !strings.Contains(squeeze(out), squeeze(want)) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "\nselftest: 1/2 mutants rejected, 1/2 variants passed, reference 8/8, starter 0/8\n") {
		t.Errorf("the table does not end with the summary line:\n%s", out)
	}

	// Without --all-steps only the named steps ran: no ALSO FAILS column.
	rep.AllSteps = false
	b.Reset()
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	if strings.Contains(out, "ALSO FAILS") {
		t.Errorf("the table has an ALSO FAILS column although only the named steps ran:\n%s", out)
	}
	if want := "lucky 5 reject NOT rejected 0/1 Passes."; !strings.Contains(squeeze(out), want) {
		t.Errorf("the table lacks %q:\n%s", want, out)
	}
}

// A mutant rebuilds only the programs built from the files it edits: the
// go command's own dependency lists decide, embedded files included.
func TestProgramsBuiltFrom(t *testing.T) {
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"./cmd/queuectl", "./cmd/sender", "./cmd/receiver"}
	for _, tc := range []struct {
		files []string
		want  []string
	}{
		{[]string{"receiver/receiver.go"}, []string{"./cmd/receiver"}},
		{[]string{"receiver/schema.sql"}, []string{"./cmd/receiver"}},
		{[]string{"queue/queue.go"}, []string{"./cmd/queuectl", "./cmd/sender"}},
		{[]string{"queue/schema.sql"}, []string{"./cmd/queuectl", "./cmd/sender"}},
		{[]string{"sender/sender.go"}, []string{"./cmd/sender"}},
		{[]string{"cmd/queuectl/main.go", "sender/sender.go"}, []string{"./cmd/queuectl", "./cmd/sender"}},
		{[]string{"internal/cliflag/cliflag.go"}, all},
		{[]string{"docs/lab.md"}, nil},
		{[]string{"labsteps/runner.go"}, nil},
	} {
		got, err := starter.ProgramsBuiltFrom(root, tc.files...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("programs built from %v = %v, want %v", tc.files, got, tc.want)
		}
	}
}
