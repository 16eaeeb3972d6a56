package report_test

import (
	"slices"
	"strings"
	"testing"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// A failure on a clause that CONTRACT.md version 2 added or changed says so
// with the changelog's line, once per line; other clauses say nothing more.
func TestChangedClausesSayHow(t *testing.T) {
	outcome := "changed in version 2: `outcome` is case-sensitive `§1.outcome`"
	busy := "changed in version 2: Writers wait up to the busy timeout from their first refused attempt, then exit 6 having written nothing, and succeed when the lock is released in time `§2.busy.wait`, `§2.busy.fail`, `§2.busy.succeed`"
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"a changed clause", []string{"§1.outcome"}, []string{outcome}},
		{"an unchanged clause", []string{"§2.claim.due"}, nil},
		{"one line for clauses cited together", []string{"§2.busy.wait", "§2.busy.fail"}, []string{busy}},
		{"changed and unchanged", []string{"§2.claim.due", "§1.outcome", "§2.busy.succeed"}, []string{outcome, busy}},
		{"no clause", nil, nil},
	} {
		if got := report.Changed(tc.ids); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Changed(%v)\n got %q\nwant %q", tc.name, tc.ids, got, tc.want)
		}
		r := result.Result{Step: result.Step{Num: 1, Slug: "s", Title: "T"}, Parts: []string{"a: one"},
			Checks: []result.Check{{What: "the outcome", Expected: "exit 2", Observed: "exit 0", Why: "because", Clause: tc.ids, Part: "a: one"}}}
		var b strings.Builder
		report.Summarize([]result.Result{r}, nil, report.Scheme{}, nil).Write(&b, func(int) string { return "lab run -v 1" })
		out := b.String()
		for _, w := range tc.want {
			if !strings.Contains(out, "\n    "+w+"\n") {
				t.Errorf("%s: the summary lacks %q:\n%s", tc.name, w, out)
			}
		}
		if got, want := strings.Count(out, "changed in version"), len(tc.want); got != want {
			t.Errorf("%s: the summary says %d changed line(s), want %d:\n%s", tc.name, got, want, out)
		}
	}
}
