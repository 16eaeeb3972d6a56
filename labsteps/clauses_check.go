package labsteps

import (
	"encoding/json"
	"fmt"

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
}
