package clauses_test

import (
	"testing"

	"snacklab"
	"snacklab/labsteps/clauses"
)

// The newest changelog section of CONTRACT.md gives each id it cites the
// sentence that cites it; ids it does not cite, and contracts without a
// changelog, have none.
func TestChangelog(t *testing.T) {
	small := []byte("# c\n\n## 7. Changelog\n\n### Version 3 (2027-01)\n\n- a rule `§1.a`; another,\n  wrapped `§1.b`.\n\nAdded: `§2.c`.\n\n### Version 2\n\n- old `§1.d`.\n")
	for _, tc := range []struct {
		name, contract string
		id, version    string
		want           string
		ok             bool
	}{
		{"CONTRACT.md: one rule", string(snacklab.Contract), "§1.outcome", "2", "`outcome` is case-sensitive `§1.outcome`", true},
		{"CONTRACT.md: a wrapped entry", string(snacklab.Contract), "§2.busy.fail", "2",
			"Writers wait up to the busy timeout from their first refused attempt, then exit 6 having written nothing, and succeed when the lock is released in time `§2.busy.wait`, `§2.busy.fail`, `§2.busy.succeed`", true},
		{"CONTRACT.md: a paragraph", string(snacklab.Contract), "§4.batch.exit", "2",
			"Added in version 2 as options (an implementation that leaves them out is not graded on them): … batched delivery `§4.batch.flag`, `§4.batch.claim`, `§4.batch.deliver`, `§4.batch.finish`, `§4.batch.events`, `§4.batch.exit`, `§4.batch.crash-switch`, `§4.batch.per-job`", true},
		{"CONTRACT.md: (was: …) is no lead-in", string(snacklab.Contract), "§1.token", "2", "a finish token is 0 … 2^63−1 `§1.token`", true},
		{"CONTRACT.md: a lead-in", string(snacklab.Contract), "§4.redirect", "2", "Sender: … redirects are not followed `§4.redirect`", true},
		{"CONTRACT.md: not changed", string(snacklab.Contract), "§2.claim.due", "2", "", false},
		{"semicolons split an entry", string(small), "§1.b", "3", "another, wrapped `§1.b`", true},
		{"a paragraph", string(small), "§2.c", "3", "Added: `§2.c`", true},
		{"only the newest version", string(small), "§1.d", "3", "", false},
		{"no changelog", "# c\n\nA rule [§1.a].\n", "§1.a", "", "", false},
	} {
		version, lines := clauses.Changelog([]byte(tc.contract))
		got, ok := lines[tc.id]
		if version != tc.version {
			t.Errorf("%s: version %q, want %q", tc.name, version, tc.version)
		}
		if tc.want != "" || tc.ok {
			if got != tc.want {
				t.Errorf("%s: %s's line\n got %q\nwant %q", tc.name, tc.id, got, tc.want)
			}
		} else if ok {
			t.Errorf("%s: %s has line %q, want none", tc.name, tc.id, got)
		}
	}
	// Every id the changelog cites is one the contract defines.
	cs, err := clauses.Parse(snacklab.Contract)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, c := range cs {
		defined[c.ID] = true
	}
	_, lines := clauses.Changelog(snacklab.Contract)
	for id := range lines {
		if !defined[id] {
			t.Errorf("the changelog cites %s, which CONTRACT.md does not define", id)
		}
	}
	if len(lines) < 50 {
		t.Errorf("the changelog cites %d ids; want the version-2 entries (over 50)", len(lines))
	}
}
