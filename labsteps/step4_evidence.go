package labsteps

import (
	"fmt"
	"strconv"
	"strings"

	"snacklab/labsteps/harness"
)

// checkEvidence follows one job through a 503, a timeout and a BadAck and
// the claim that finds its last lease spent, and reads back the evidence of
// all three attempts with `queuectl show`. The evidence is optional in the
// contract: an implementation whose finish refuses --status as a usage
// error (exit 2) keeps none, and is not graded on it.
func checkEvidence(h *harness.Harness) {
	h.Clause("§3.finish.evidence")
	h.UseQueue("queue-evidence.db") // a queue of its own: no other job is due when its lease runs out
	h.Init()
	const id = "f-evidence"
	h.MustEnqueue(id, 7, t0, "--max-attempts", "3")
	tok := func(c harness.Claimed) string { return strconv.FormatInt(c.Job.Token, 10) }

	c1 := h.Claim("A", t0, 30000)
	h.ExpectExit("claim "+id, 0, c1.Run, "it is due")
	r := h.Queuectl("finish", t0+10, "--id", id, "--token", tok(c1), "--outcome", "retry", "--status", "503", "--error", "http")
	if r.Code == 2 {
		h.Narrate("· finish refuses --status (exit 2): this implementation keeps no evidence of attempts; not graded (CONTRACT §3, optional)")
		return
	}
	why := "CONTRACT §3: finish keeps --status and --error with the attempt, in the same transaction"
	h.ExpectExit("finish "+id+" retry --status 503 --error http", 0, r, why)
	c2 := h.Claim("A", t0+5000, 30000) // past the first backoff (at most 1 s)
	h.ExpectExit("claim "+id+" again after its backoff", 0, c2.Run, "its backoff has passed")
	r = h.Queuectl("finish", t0+6000, "--id", id, "--token", tok(c2), "--outcome", "retry", "--error", "timeout")
	h.ExpectExit("finish "+id+" retry --error timeout", 0, r, why)
	c3 := h.Claim("A", t0+20000, 30000) // past the second backoff (at most 2 s)
	h.ExpectExit("claim "+id+" a third time", 0, c3.Run, "its backoff has passed")
	r = h.Queuectl("attempt", t0+21000, "--id", id, "--token", tok(c3), "--status", "200", "--error", "badack")
	h.ExpectExit("attempt "+id+" --status 200 --error badack (a BadAck decides nothing)", 0, r,
		"CONTRACT §3: an implementation that keeps evidence keeps it for an answer that decided nothing, the job staying leased")
	end := h.Claim("B", t0+50001, 30000) // its last lease has run out: quarantined
	h.ExpectExit("claim after the last lease ran out", 13, end.Run, "the only job is spent: quarantined as exhausted, nothing to hand out")

	h.Clause("§3.finish.evidence", "§3.show.attempts")
	s := h.MustShow(id)
	h.Equal("show "+id+": state", "dead(exhausted)", stateReason(s.Job), "three attempts of three, the last lease spent")
	var got []string
	if s.Attempts != nil {
		for _, a := range *s.Attempts {
			got = append(got, a.String())
		}
	}
	want := []string{
		fmt.Sprintf("#1 token 1 retry 503 http at %d", t0+10),
		fmt.Sprintf("#2 token 2 retry null timeout at %d", t0+6000),
		fmt.Sprintf("#3 token 3 undecided 200 badack at %d", t0+21000),
	}
	h.Equal("show "+id+": the evidence of each attempt, oldest first", strings.Join(want, "; "), strings.Join(got, "; "),
		"the quarantine keeps the evidence of a failure: an operator asking why the job died reads each attempt's status, "+
			"error class and time, never a body")
}
