package labsteps

import "fmt"

// t0 is the injected clock at the start of every step, in ms. Any value would
// do; a small one keeps the arithmetic in the messages readable.
const t0 = 10_000

var step1 = Step{
	Num: 1, Slug: "retry",
	Title: "Retry function: backoff, cap, jitter, and the retry/exhausted/deadline decision",
	Checks: "`queuectl backoff` gives exactly the contract's delay (base 1 s doubling to a 60 s cap, " +
		"with jitter from FNV-1a of \"id:attempt\"), and `finish retry` decides at each boundary: " +
		"budget left → pending at now+backoff; attempts = max → dead(exhausted), even past the deadline; " +
		"next = deadline → dead(deadline); next = deadline−1 → pending.",
	Why: "A retry that fires at once takes the slot of healthy orders; one that never stops hides a " +
		"poison order forever. Deterministic jitter spreads retries out and still lets anyone predict them.",
	run: runStep1,
}

func runStep1(h *Harness) {
	whyBackoff := "the delay is part of the contract: exponential so a failing receiver is not hammered, " +
		"capped so a job is retried within a minute, jittered from the id so retries spread out yet stay predictable"
	var cases []BackoffCase
	for a := 1; a <= 8; a++ {
		cases = append(cases, BackoffCase{"o-1", a})
	}
	cases = append(cases, BackoffCase{"snack:order-9", 1}, BackoffCase{"snack:order-9", 6},
		BackoffCase{"snack:order-9", 7}, BackoffCase{"snack:order-9", 1000})
	got := h.Backoffs(cases)
	for i, c := range cases {
		want := expectedBackoff(c.ID, c.Attempt)
		d := backoffCeiling(c.Attempt)
		h.Equal(fmt.Sprintf("backoff(%s, %d), within [%d, %d]", c.ID, c.Attempt, d/2, d), want, got[i], whyBackoff)
	}

	h.Init()
	const window = 5000
	// Four jobs, all due at t0, each to be failed at one boundary.
	h.MustEnqueue("a-dl-eq", 7, t0, "--deadline-ms", fmt.Sprint(window))
	h.MustEnqueue("b-dl-lt", 7, t0, "--deadline-ms", fmt.Sprint(window))
	h.MustEnqueue("c-ex", 7, t0, "--max-attempts", "2")
	h.MustEnqueue("d-both", 7, t0, "--max-attempts", "1", "--deadline-ms", "400")
	held := h.ClaimAll("W", 4, t0, 30000)

	// c-ex: attempt 1 of 2 fails → pending at now + backoff(c-ex, 1).
	b1 := expectedBackoff("c-ex", 1)
	f := h.MustFinish("c-ex", held["c-ex"].Token, "retry", t0)
	h.Equal("retry with budget left (attempt 1 of 2): state", "pending", f.State,
		"a temporary failure with attempts left is tried again later, not dropped")
	h.Equal("retry with budget left: available_at = now + backoff(c-ex, 1)", t0+b1, f.AvailableAt, whyBackoff)
	c := h.Claim("W", t0+b1, 30000)
	h.Equal("claim at available_at brings c-ex back", "c-ex", c.Job.ID, "a backed-off job is due exactly at available_at")
	f = h.MustFinish("c-ex", c.Job.Token, "retry", t0+b1)
	h.Equal("retry at attempt 2 of 2: state and reason", "dead(exhausted)", stateReason(*f),
		"when the last attempt fails the job is quarantined with its evidence, not retried forever")

	// d-both: the last attempt, and the deadline passed too: exhausted wins.
	f = h.MustFinish("d-both", held["d-both"].Token, "retry", t0+b1)
	h.Equal("retry at attempt 1 of 1 past the deadline: state and reason", "dead(exhausted)", stateReason(*f),
		"the contract checks the attempt budget first, so the reason names the limit that was really used up")

	// a-dl-eq: fail it so that now + backoff lands exactly on the deadline.
	dl := int64(t0 + window)
	now := dl - expectedBackoff("a-dl-eq", 1)
	f = h.MustFinish("a-dl-eq", held["a-dl-eq"].Token, "retry", now)
	h.Equal(fmt.Sprintf("retry whose next try (%d) equals deadline_at (%d): state and reason", dl, dl), "dead(deadline)", stateReason(*f),
		"a try scheduled at the deadline would already be too late: the deadline is not a time to try at")
	// b-dl-lt: one ms earlier, the job is retried, at deadline - 1.
	now = dl - expectedBackoff("b-dl-lt", 1) - 1
	f = h.MustFinish("b-dl-lt", held["b-dl-lt"].Token, "retry", now)
	h.Equal(fmt.Sprintf("retry whose next try is deadline_at−1 (%d): state", dl-1), "pending", f.State,
		"one ms before the deadline there is still time: quarantining it would drop a deliverable order")
	h.Equal("…and it is due at deadline_at−1", dl-1, f.AvailableAt, whyBackoff)
}

// stateReason is "dead(exhausted)" or "pending".
func stateReason(j Job) string {
	if j.Reason == nil {
		return j.State
	}
	return j.State + "(" + *j.Reason + ")"
}
