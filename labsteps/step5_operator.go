package labsteps

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"snacklab/labsteps/harness"
)

// deadItem is one item of `queuectl dead --json` (CONTRACT §3): the job's
// columns and, beside them, its last attempt's evidence and its latest
// investigation, each null when there is none.
type deadItem struct {
	ID            string                 `json:"id"`
	LastAttempt   *harness.Attempt       `json:"last_attempt"`
	Investigation *harness.Investigation `json:"investigation"`
}

// operatorVerbs judges the optional operator verbs `dead` and `alerts`
// (CONTRACT §3): two jobs die one after the other, one after two attempts
// and two investigations; `dead --json` lists them oldest first, each with
// its last attempt and latest investigation, `--limit 1` only the oldest;
// `alerts` with no threshold is quiet while nothing is dead and exits 22
// once a job is. An implementation that does not offer a verb (exit 2, a
// usage error) is not graded on it.
func operatorVerbs(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json")
	h.UseQueue("queue-e.db")
	h.Init()
	hasDead, hasAlerts := operatorVerbsOffered(h)
	if !hasDead && !hasAlerts {
		return
	}
	h.MustEnqueue("o-old", 7, t0)
	h.MustEnqueue("o-new", 7, t0)
	if hasAlerts {
		h.Clause("§3.alerts.default")
		h.ExpectExit("`queuectl alerts` with no threshold and nothing dead", 0, h.Queuectl("alerts", t0), whyAlertsDefault+"; nothing dead is nothing to say")
	}
	evidence := killBothJobs(h)
	investigateOldTwice(h)
	if hasDead {
		judgeDeadList(h, evidence)
	}
	if hasAlerts {
		h.Clause("§3.alerts.default")
		h.ExpectExit("`queuectl alerts` with no threshold and two jobs dead", 22, h.Queuectl("alerts", t0+9000), whyAlertsDefault)
	}
}

// whyAlertsDefault is why alerts with no threshold speaks up once a job is dead.
const whyAlertsDefault = "CONTRACT §3: alerts with no threshold flag checks \"any dead job\", as --max-dead 0: the quarantine's point is that someone looks"

// operatorVerbsOffered asks for `dead` and `alerts` on an empty queue: a
// usage error (exit 2) says the implementation does not offer the verb.
func operatorVerbsOffered(h *harness.Harness) (hasDead, hasAlerts bool) {
	dead := h.Queuectl("dead", t0)
	alerts := h.Queuectl("alerts", t0, "--max-dead", "0")
	hasDead, hasAlerts = dead.Code != 2, alerts.Code != 2
	if !hasDead {
		h.Narrate("· `queuectl dead` is a usage error (exit 2): this implementation does not offer it; not graded (CONTRACT §3, optional)")
	}
	if !hasAlerts {
		h.Narrate("· `queuectl alerts --max-dead 0` is a usage error (exit 2): this implementation does not offer it; not graded (CONTRACT §3, optional)")
	}
	return hasDead, hasAlerts
}

// killBothJobs makes o-old dead after two attempts (a 503, then a 404 on
// its second) and o-new dead after one (a 410), with the evidence when
// finish takes it; it reports whether it did.
func killBothJobs(h *harness.Harness) (evidence bool) {
	h.Clause("§3.claim.json", "§3.finish.json", "§3.finish.evidence")
	held := h.ClaimAll("A", 2, t0, 30000)
	tok := func(id string) string { return strconv.FormatInt(held[id].Token, 10) }
	evidence = true
	r := h.Queuectl("finish", t0+10, "--id", "o-old", "--token", tok("o-old"), "--outcome", "retry", "--status", "503", "--error", "http")
	if r.Code == 2 {
		evidence = false
		h.Narrate("· finish refuses --status (exit 2): this implementation keeps no evidence; dead's last_attempt must then be null")
		r = h.Queuectl("finish", t0+10, "--id", "o-old", "--token", tok("o-old"), "--outcome", "retry")
	}
	h.ExpectExit("finish o-old retry", 0, r, "o-old is leased to A under this token")
	c := h.Claim("A", t0+5000, 30000) // past o-old's first backoff (at most 1 s); o-new still leased
	h.Check("claim o-old again after its backoff: token 2", c.Run.Code == 0 && c.Claimed && c.Job.ID == "o-old" && c.Job.Token == 2,
		"o-old claimed with token 2", fmt.Sprintf("%s %s", c.Run.Exit(), harness.Trim(c.Run.Stdout)), "o-old is the only claimable job: its backoff has passed, o-new is leased")
	finish := func(id, token, status string, now int64) {
		args := []string{"--id", id, "--token", token, "--outcome", "permanent"}
		if evidence {
			args = append(args, "--status", status, "--error", "http")
		}
		h.ExpectExit("finish "+id+" permanent", 0, h.Queuectl("finish", now, args...), id+" is leased to A under this token")
	}
	finish("o-old", "2", "404", t0+5001)
	finish("o-new", tok("o-new"), "410", t0+6000)
	return evidence
}

// investigateOldTwice records two looks at o-old, so that dead must pick
// the latest.
func investigateOldTwice(h *harness.Harness) {
	h.Clause("§3.investigate.json")
	for i, note := range []string{"INC-1", "INC-2"} {
		v := h.Investigate("o-old", note, t0+7000+int64(i)*1000)
		h.ExpectExit("investigate o-old "+note, 0, v.Run, "o-old is dead: an operator records the ticket of each look at it")
	}
}

// whyDeadList is why dead lists what it lists.
const whyDeadList = "CONTRACT §3: dead --json lists the quarantined jobs oldest first, each with the evidence of its last attempt " +
	"and its latest investigation (null when none): what an operator reads to decide what to do with them"

// judgeDeadList checks `dead --json`, whole and with --limit 1.
func judgeDeadList(h *harness.Harness, evidence bool) {
	h.Clause("§3.dead.evidence")
	last := func(s string) *string {
		if !evidence {
			return nil
		}
		return &s
	}
	want := []string{
		fmt.Sprintf("o-old last_attempt=%s investigation=INC-2 at %d", harness.Repr(last(fmt.Sprintf("#2 token 2 permanent 404 http at %d", t0+5001))), t0+8000),
		fmt.Sprintf("o-new last_attempt=%s investigation=null", harness.Repr(last(fmt.Sprintf("#1 token 1 permanent 410 http at %d", t0+6000)))),
	}
	h.Equal("queuectl dead --json: the dead jobs oldest first, each with its last attempt and latest investigation",
		strings.Join(want, "; "), deadList(h), whyDeadList)
	h.Equal("queuectl dead --json --limit 1: only the oldest", want[0], deadList(h, "--limit", "1"),
		"CONTRACT §3: dead --limit N lists at most N, oldest first: the jobs that have waited longest come first")
}

// deadList runs `queuectl dead --json` with args and prints its items as
// the checks compare them.
func deadList(h *harness.Harness, args ...string) string {
	r := h.Queuectl("dead", t0+9000, args...)
	h.ExpectExit("queuectl dead "+strings.Join(args, " "), 0, r, whyDeadList)
	var items []deadItem
	if r.Code != 0 {
		return "(no answer)"
	}
	if err := json.Unmarshal([]byte(r.Stdout), &items); err != nil {
		return fmt.Sprintf("not a JSON array of jobs (%v): %s", err, harness.Trim(r.Stdout))
	}
	var got []string
	for _, it := range items {
		inv := "null"
		if it.Investigation != nil {
			inv = fmt.Sprintf("%s at %d", it.Investigation.Note, it.Investigation.AtMs)
		}
		got = append(got, fmt.Sprintf("%s last_attempt=%s investigation=%s", it.ID, harness.Repr(attemptText(it.LastAttempt)), inv))
	}
	return strings.Join(got, "; ")
}

// attemptText is an attempt as the checks compare it; nil stays nil.
func attemptText(a *harness.Attempt) *string {
	if a == nil {
		return nil
	}
	s := a.String()
	return &s
}
