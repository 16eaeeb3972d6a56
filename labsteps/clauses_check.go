package labsteps

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"snacklab/labsteps/harness"
)

// checkFindsOrphans: `queuectl check` finds audit rows that name no job
// (an invariant of CONTRACT §2 that it lists) and reports them as §3 says:
// exit 5, {"ok":false,"total":n,"problems":[{"rule","job_id","detail"}…]},
// at most --max of them listed.
func checkFindsOrphans(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§2.investigate.row")
	h.UseQueue("queue-check.db")
	h.Init()
	for _, id := range []string{"c-1", "c-2"} {
		h.MustEnqueue(id, 7, t0)
		v := h.Investigate(id, "T-"+id, t0+1)
		h.ExpectExit("investigate "+id, 0, v.Run, "the step needs an audit row for "+id)
	}
	h.Clause("§3.check.ok")
	r := h.Queuectl("check", -1)
	h.ExpectExit("`queuectl check` of a healthy queue with audit rows", 0, r, "CONTRACT §3: a healthy queue is ok")

	h.BreakQueue("rename jobs c-1 and c-2 (their investigations now name no job)",
		"UPDATE jobs SET id = 'renamed-' || id WHERE id IN ('c-1', 'c-2');")
	h.Clause("§3.check.invariants", "§3.check.report")
	why := "CONTRACT §3: check runs SQLite's integrity check, then the invariants of §2 — among them audit rows naming a job — " +
		"and exits 5 listing the first --max problems as {\"rule\",\"job_id\",\"detail\"}: an operator runs it after a hand edit or a crash to learn whether the history still adds up"
	r = h.Queuectl("check", -1, "--max", "1")
	h.ExpectExit("`queuectl check --max 1` with two investigations that name no job", 5, r, why)
	var rep struct {
		OK       *bool             `json:"ok"`
		Total    *int64            `json:"total"`
		Problems []json.RawMessage `json:"problems"`
	}
	h.Parse(r, &rep)
	var first shape
	if len(rep.Problems) > 0 {
		_ = json.Unmarshal(rep.Problems[0], &first)
	}
	total := "total>=2"
	if rep.Total == nil || *rep.Total < 2 {
		total = "total=" + harness.Repr(rep.Total)
	}
	h.Equal("…its report: ok, problems listed (--max 1), total at least 2", "ok=false listed=1 total>=2",
		fmt.Sprintf("ok=%s listed=%d %s", harness.Repr(rep.OK), len(rep.Problems), total), why)
	expectMembers(h, "…the problem listed", first, []string{"rule", "job_id", "detail"}, why)
	checkFindsEachRule(h)
}

// brokenRules are the invariants of CONTRACT §3 check's list that a hand
// edit can break in one job each, with the edit: every rule is judged on its
// own job, so a check that leaves one rule out misses that job. The edits
// switch off the schema's CHECK constraints for their connection, as a hand
// edit or another program might have.
var brokenRules = []struct{ id, rule, edit string }{
	{"i-lease", "owner and lease exactly when leased", "UPDATE jobs SET owner = 'ghost' WHERE id = 'i-lease';"},
	{"i-reason", "reason exactly when dead", "UPDATE jobs SET reason = 'permanent' WHERE id = 'i-reason';"},
	{"i-budget", "attempts within the budget", "UPDATE jobs SET attempts = max_attempts + 1, token = max_attempts + 1 WHERE id = 'i-budget';"},
	{"i-token", "token ≥ attempts since the last redrive plus its previous token", "UPDATE jobs SET attempts = 2, token = 1 WHERE id = 'i-token';"},
	{"i-deadline", "pending jobs due before their deadline", "UPDATE jobs SET available_at = deadline_at WHERE id = 'i-deadline';"},
}

// checkFindsEachRule: each invariant of §3 check's list, broken in a job of
// its own, is found: the job is named among the problems.
func checkFindsEachRule(h *harness.Harness) {
	h.Section("d: each invariant broken in a job of its own")
	h.UseQueue("queue-rules.db")
	h.Init()
	script := "PRAGMA ignore_check_constraints = ON;\n"
	for _, b := range brokenRules {
		h.MustEnqueue(b.id, 7, t0)
		script += b.edit + "\n"
	}
	h.BreakQueue("break one invariant in each of "+fmt.Sprint(len(brokenRules))+" jobs", script)
	h.Clause("§3.check.invariants", "§3.check.report")
	r := h.Queuectl("check", -1, "--max", "100")
	why := "CONTRACT §3: check finds every invariant of §2 its list names — owner and lease exactly when leased, " +
		"reason exactly when dead, attempts within the budget, token ≥ attempts since the last redrive plus its " +
		"previous token, pending jobs due before their deadline — each broken here in a job of its own"
	h.ExpectExit(fmt.Sprintf("`queuectl check --max 100` with %d jobs each breaking one invariant", len(brokenRules)), 5, r, why)
	var rep struct {
		Problems []struct {
			JobID *string `json:"job_id"`
		} `json:"problems"`
	}
	h.Parse(r, &rep)
	var named []string
	for _, p := range rep.Problems {
		if p.JobID != nil {
			named = append(named, *p.JobID)
		}
	}
	var missed []string
	for _, b := range brokenRules {
		if !slices.Contains(named, b.id) {
			missed = append(missed, b.id+" ("+b.rule+")")
		}
	}
	got := "every one named"
	if len(missed) > 0 {
		got = "not named: " + strings.Join(missed, "; ")
	}
	h.Equal("…each job that breaks an invariant is named among the problems", "every one named", got, why)
}
