package labsteps

import (
	"fmt"
	"math"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step4 = Step{
	Step: result.Step{
		Num: 4, Slug: "finish",
		Title: "Finish: ok/permanent/retry, exhausted and deadline, stale tokens, nothing lost, lease released",
		Checks: "Five leased jobs are finished down every path: ok → done; permanent → dead(permanent); retry with " +
			"budget → pending at now+backoff; retry at the last attempt → dead(exhausted); retry whose next try is " +
			"at the deadline → dead(deadline). On every path id, qty, token and attempts are kept and owner and " +
			"lease_until become null. A finish with a token from the future or the past, on a job no longer leased, " +
			"or for an unknown id returns applied=false (exit 12) and changes nothing. The lease's expiry is not " +
			"checked: the token is the fence. An outcome other than ok, retry or permanent is refused (exit 3), " +
			"nothing on stdout, the queue file unchanged. Then, with a sixth job leased, `queuectl stats` counts the six by state and the three " +
			"dead ones by reason, every key present. Where finish takes --status and --error (optional), a job that " +
			"died after a 503, a timeout and a BadAck shows all three attempts with their evidence and times.",
		Why: "finish is where a delivery's evidence is written down. Deleting the id or qty loses the order; keeping " +
			"an owner on a finished job blocks nothing but lies; and a stale holder that can still finish overwrites " +
			"the work of the sender that took over.",
	},
	run: runStep4,
}

func runStep4(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json")
	h.Init()
	held := leaseFiveJobs(h)

	// Stale tokens and unknown outcomes first, while f-ok is leased under token 1.
	ok := held["f-ok"]
	refuseBadTokensAndOutcomes(h, ok)
	staleTokensNotApplied(h, ok)
	unknownIDNotApplied(h)

	// Every path, each after the lease itself has run out: the token decides, not the clock.
	finishEveryPath(h, held)

	// A finish on a job that is no longer leased, with the token that was right a moment ago.
	decidedJobsNotFinishedAgain(h, ok)

	// What an operator counts now: one job down every path, and one held.
	countEveryPath(h)

	checkEvidence(h)
}

// lateFinish is the now of the finishes down every path: just past the
// jobs' lease_until.
const lateFinish int64 = t0 + 30000 + 1

// whyStale is why a finish with a token that is not the current grant's
// is not applied.
const whyStale = "the token is the fence: only the holder of the current grant may record an outcome, so a " +
	"sender that lost its lease can never overwrite the work of the one that took over"

// leaseFiveJobs enqueues one job for each path of finish, f-ex with one
// attempt and f-dl with a deadline any retry lands past, and leases all
// five to A.
func leaseFiveJobs(h *harness.Harness) map[string]harness.Job {
	ids := []string{"f-dl", "f-ex", "f-ok", "f-perm", "f-retry"}
	for _, id := range ids {
		extra := []string{}
		switch id {
		case "f-ex":
			extra = []string{"--max-attempts", "1"}
		case "f-dl":
			extra = []string{"--deadline-ms", "300"} // any retry from t0 on lands past it
		}
		h.MustEnqueue(id, 7, t0, extra...)
	}
	return h.ClaimAll("A", len(ids), t0, 30000)
}

// refuseBadTokensAndOutcomes: a token out of range and an outcome other
// than ok, retry or permanent are invalid input.
func refuseBadTokensAndOutcomes(h *harness.Harness, ok harness.Job) {
	whyOutcome := "the outcome is exactly ok, retry or permanent (CONTRACT §1): anything else is a sender's bug, and " +
		"guessing what it meant could mark an undelivered order done; refused as invalid (exit 3), the job stays leased"
	fin := func(outcome string) harness.Call {
		return harness.Call{Verb: "finish", Now: t0 + 1, Args: []string{"--id", "f-ok", "--token", fmt.Sprint(ok.Token), "--outcome", outcome}}
	}
	tok := func(token string) harness.Call {
		return harness.Call{Verb: "finish", Now: t0 + 1, Args: []string{"--id", "f-ok", "--token", token, "--outcome", "ok"}}
	}
	whyToken := "a token is an integer 0 … 9223372036854775807 (CONTRACT §1): anything else is invalid input (exit 3), refused before the queue is read"
	h.Clause("§1.token", "§1.outcome", "§1.invalid", "§3.stdout.refusal", "§6.nothing-written")
	h.ExpectRefused([]harness.Refusal{
		{What: "--token -1", Call: tok("-1"), Code: 3, Why: whyToken},
		{What: "--token 9223372036854775808", Call: tok("9223372036854775808"), Code: 3, Why: whyToken},
		{What: "outcome \"done\"", Call: fin("done"), Code: 3, Why: whyOutcome},
		{What: "outcome \"OK\"", Call: fin("OK"), Code: 3, Why: whyOutcome},
		{What: "outcome \"fail\"", Call: fin("fail"), Code: 3, Why: whyOutcome},
	}, nil)
}

// staleTokensNotApplied: a token from the future or the past is not
// applied.
func staleTokensNotApplied(h *harness.Harness, ok harness.Job) {
	h.Clause("§2.finish.fence", "§2.finish.not-applied", "§1.token", "§3.finish.json", "§3.stdout.answers", "§2.time.untouched")
	h.ExpectNotApplied("finish f-ok with token 2 (a grant that never happened)", h.Finish("f-ok", ok.Token+1, "ok", t0+1), ok, whyStale)
	h.ExpectNotApplied("finish f-ok with token 0 (an older grant)", h.Finish("f-ok", ok.Token-1, "ok", t0+1), ok, whyStale)
	h.ExpectNotApplied("finish f-ok with token 9223372036854775807 (the largest valid token, never granted)",
		h.Finish("f-ok", math.MaxInt64, "ok", t0+1), ok, whyStale+"; the largest token the contract allows is valid input, so the answer is not applied (exit 12), not invalid")
}

// unknownIDNotApplied: a finish for an unknown id is not applied either.
func unknownIDNotApplied(h *harness.Harness) {
	h.Clause("§2.finish.not-applied", "§3.finish.json")
	unk := h.Finish("no-such-order", 1, "ok", t0+1)
	h.ExpectExit("finish of an unknown id: exit code", 12, unk.Run, "an unknown id is not applied, like a stale token")
	h.Equal("finish of an unknown id: answer", "applied=false job=null",
		fmt.Sprintf("applied=%t job=%s", unk.Applied, harness.Repr(unk.Job)), "there is no job to report")
}

// finishPath is one path of finish: the outcome given and the job after.
type finishPath struct {
	id, outcome, want string
	availableAt       int64
	why               string
}

// finishEveryPath finishes each of the five jobs down its own path, after
// its lease has run out.
func finishEveryPath(h *harness.Harness, held map[string]harness.Job) {
	h.Clause("§2.finish.expired-lease", "§2.finish.ok", "§2.finish.permanent", "§2.finish.retry.pending", "§2.finish.retry.exhausted", "§2.finish.retry.deadline", "§2.state.keep", "§2.state.owner-lease", "§2.state.reason", "§2.time.updated", "§2.time.created", "§2.backoff.formula", "§3.finish.json", "§2.state.only-named")
	paths := []finishPath{
		{"f-ok", "ok", "done", t0, "a delivered order is done, and done is final"},
		{"f-perm", "permanent", "dead(permanent)", t0, "a refusal the receiver will repeat is quarantined at once, not retried"},
		{"f-retry", "retry", "pending", lateFinish + expectedBackoff("f-retry", 1), "a temporary failure with budget left is tried again after the backoff"},
		{"f-ex", "retry", "dead(exhausted)", t0, "the last attempt failed: quarantine it with its evidence instead of retrying forever"},
		{"f-dl", "retry", "dead(deadline)", t0, "the next try would be past the order's deadline: quarantine it rather than deliver it too late"},
	}
	for _, p := range paths {
		finishOnePath(h, p, held[p.id])
	}
}

// finishOnePath finishes the job that was before down path p and checks
// the job after, field by field.
func finishOnePath(h *harness.Harness, p finishPath, before harness.Job) {
	j := h.MustFinish(p.id, before.Token, p.outcome, lateFinish)
	h.Equal(fmt.Sprintf("finish %s %s after lease_until: state", p.id, p.outcome), p.want, stateReason(*j), p.why)
	h.Equal(fmt.Sprintf("finish %s: id, qty, token and attempts are kept; owner and lease_until released", p.id),
		fmt.Sprintf("id=%s qty=7 token=%d attempts=%d owner=null lease_until=null", p.id, before.Token, before.Attempts),
		fmt.Sprintf("id=%s qty=%d token=%d attempts=%d owner=%s lease_until=%s", j.ID, j.Qty, j.Token, j.Attempts, harness.Repr(j.Owner), harness.Repr(j.LeaseUntil)),
		"no path deletes the business id or the quantity, and every path ends the lease: owner and lease_until exist only while leased")
	h.Equal(fmt.Sprintf("finish %s: available_at", p.id), p.availableAt, j.AvailableAt,
		"only a retry reschedules the job, to now + backoff(id, attempts)")
	h.Equal(fmt.Sprintf("finish %s: updated_at is the finish's now, created_at the enqueue's", p.id),
		fmt.Sprintf("updated_at=%d created_at=%d", lateFinish, int64(t0)), fmt.Sprintf("updated_at=%d created_at=%d", j.UpdatedAt, j.CreatedAt),
		"CONTRACT §2: an applied finish changes the job, so updated_at is its now (when a job became done or dead is what an operator sorts the quarantine by); created_at never changes")
	want := before
	want.State, want.Reason, want.Owner, want.LeaseUntil, want.AvailableAt, want.UpdatedAt = p.want, nil, nil, nil, p.availableAt, lateFinish
	if st, reason, ok := strings.Cut(strings.TrimSuffix(p.want, ")"), "("); ok {
		want.State, want.Reason = st, &reason
	}
	h.Equal(fmt.Sprintf("finish %s: every other field as the claim left it (budget, deadline, window)", p.id), want.Fields(), j.Fields(),
		"CONTRACT §2: a finish changes state, reason, owner, lease_until, available_at (a retry) and updated_at; nothing else is its to change")
}

// decidedJobsNotFinishedAgain: a finish on a job that is no longer leased
// is not applied, even with the token that was right a moment ago.
func decidedJobsNotFinishedAgain(h *harness.Harness, ok harness.Job) {
	h.Clause("§2.finish.fence", "§2.finish.not-applied", "§2.state.keep")
	done := h.MustShow("f-ok").Job
	h.ExpectNotApplied("finish f-ok ok again with its old token after it is done", h.Finish("f-ok", ok.Token, "ok", lateFinish+1), done, whyStale)
	pend := h.MustShow("f-retry").Job
	h.ExpectNotApplied("finish f-retry again with its token while it is pending", h.Finish("f-retry", pend.Token, "permanent", lateFinish+1), pend,
		"a finish applies only to a leased job: once decided, a duplicate report must not decide it again")
}

// countEveryPath leases a sixth job and checks what stats counts: one job
// down every path, and one held. f-retry backs off at least half a second,
// so the claim a moment later takes the new job.
func countEveryPath(h *harness.Harness) {
	h.MustEnqueue("f-held", 7, lateFinish+1)
	hc := h.Claim("W", lateFinish+2, 30000)
	h.Equal("W claims f-held, the only job due", "f-held", hc.Job.ID, "f-retry is backing off; f-held is due")
	h.Clause("§3.stats.json")
	var st struct {
		Counts       map[string]int64 `json:"counts"`
		DeadByReason map[string]int64 `json:"dead_by_reason"`
	}
	r := h.Queuectl("stats", -1)
	h.ExpectExit("queuectl stats", 0, r, "stats only reads")
	if r.Code == 0 {
		h.Parse(r, &st)
	}
	h.Equal("queuectl stats: counts and dead_by_reason, one job down each path and one leased",
		"pending=1 leased=1 done=1 dead=3; permanent=1 exhausted=1 deadline=1",
		fmt.Sprintf("pending=%s leased=%s done=%s dead=%s; permanent=%s exhausted=%s deadline=%s",
			key(st.Counts, "pending"), key(st.Counts, "leased"), key(st.Counts, "done"), key(st.Counts, "dead"),
			key(st.DeadByReason, "permanent"), key(st.DeadByReason, "exhausted"), key(st.DeadByReason, "deadline")),
		"CONTRACT §3: stats counts every job by state and the quarantined ones by reason, every key present: the numbers an operator watches to see what needs a person")

}

// key is m[k] as text, "missing" when the key is absent: a count of zero must
// still be there.
func key(m map[string]int64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprint(v)
	}
	return "missing"
}
