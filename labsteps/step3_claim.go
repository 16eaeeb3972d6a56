package labsteps

import "fmt"

var step3 = Step{
	Num: 3, Slug: "claim",
	Title: "Claim: lease, owner, token +1; nothing before available_at or lease_until; reclaim at lease_until",
	Checks: "A claim before the job's available_at finds nothing; at available_at it leases the job to its " +
		"owner until now+lease with token 1 and attempts 1. Another owner finds nothing at lease_until−1 and " +
		"reclaims at lease_until exactly, with token 2. A job backing off after a failure is skipped, and an " +
		"independent job behind it is claimed instead; the backed-off job is claimable at its available_at, not before. " +
		"A spent job is quarantined by the claim, not handed out: one whose holder vanished on its last attempt " +
		"becomes dead(exhausted) at lease_until, one never claimed before its deadline dead(deadline).",
	Why: "The lease is what lets a second sender finish the work of one that died; the token, bumped by exactly " +
		"one per grant, is what tells the two apart afterwards. Off by one at either boundary and a job is " +
		"either handed to two senders at once or stuck a tick longer than promised.",
	run: runStep3,
}

func runStep3(h *Harness) {
	const lease = 5000
	h.Init()
	h.MustEnqueue("o-1", 7, t0)

	c := h.Claim("A", t0-1, lease)
	h.ExpectExit("claim 1 ms before available_at finds nothing (exit 13)", 13, c.Run,
		"a job is not due before its available_at; handing it out early breaks the schedule the queue promised")

	c = h.Claim("A", t0, lease)
	h.ExpectExit("claim at available_at", 0, c.Run, "the job is due at available_at itself")
	grant := func(j Job) string {
		return fmt.Sprintf("%s %s owner=%s lease_until=%s token=%d attempts=%d", j.ID, j.State, show(j.Owner), show(j.LeaseUntil), j.Token, j.Attempts)
	}
	h.Equal("the claim leases o-1 to A until now+lease with token 1, attempt 1",
		fmt.Sprintf("o-1 leased owner=A lease_until=%d token=1 attempts=1", t0+lease), grant(c.Job),
		"the owner, the lease and the token are what every later step relies on to tell holders apart")

	c = h.Claim("B", t0+lease-1, lease)
	h.ExpectExit("B's claim at lease_until−1 finds nothing (exit 13)", 13, c.Run,
		"until lease_until the job belongs to A: a second holder now would deliver the order twice at once")

	c = h.Claim("B", t0+lease, lease)
	h.ExpectExit("B's claim at lease_until exactly reclaims the job", 0, c.Run,
		"the expiry instant itself is expired (lease_until <= now): waiting one more tick delays every recovery and breaks the contract's boundary")
	h.Equal("the reclaim leases o-1 to B with token 2, attempt 2",
		fmt.Sprintf("o-1 leased owner=B lease_until=%d token=2 attempts=2", t0+2*lease), grant(c.Job),
		"each grant bumps the token by exactly one, so A's token 1 is now stale and its late finish can be refused")

	// A job backing off must not block an independent one behind it.
	now := int64(t0 + 1)
	h.MustEnqueue("p-slow", 7, t0)
	h.MustEnqueue("q-fast", 7, now)
	c = h.Claim("W", now, 30000)
	h.Equal("of two due jobs the one due first is claimed", "p-slow", c.Job.ID,
		"jobs are claimed in order of available_at, then id")
	f := h.MustFinish("p-slow", c.Job.Token, "retry", now)
	back := f.AvailableAt
	h.Equal("p-slow fails and backs off until now + backoff(p-slow, 1)", now+expectedBackoff("p-slow", 1), back,
		"the retry is scheduled by the contract's backoff")
	c = h.Claim("W", now, 30000)
	h.ExpectExit("while p-slow backs off, a claim still gets work", 0, c.Run,
		"independent snack orders must not queue behind a failing one: skipping it is the point of a per-job schedule")
	h.Equal("…and the work is the independent job q-fast", "q-fast", c.Job.ID,
		"a backing-off job is skipped, never waited for")
	c = h.Claim("W", back-1, 30000)
	h.ExpectExit("claim at p-slow's available_at−1 finds nothing", 13, c.Run,
		"retrying before the backoff has passed is the hammering the backoff exists to prevent")
	c = h.Claim("W", back, 30000)
	h.ExpectExit("claim at p-slow's available_at", 0, c.Run, "the backed-off job is due again at available_at exactly")
	h.Equal("…gets p-slow with token 2, attempt 2", "p-slow token=2 attempts=2",
		fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts),
		"each grant counts one attempt against the budget and bumps the token by one")

	// Spent jobs are quarantined by the claim, not handed out (CONTRACT §2 claim, 1).
	h.UseQueue("queue-spent.db")
	h.Init()
	h.MustEnqueue("s-last", 7, t0, "--max-attempts", "1")
	h.MustEnqueue("s-late", 7, t0, "--deadline-ms", "3000")
	c = h.Claim("A", t0, lease)
	h.Equal("A claims s-last, its one and only attempt", "s-last token=1 attempts=1",
		fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts), "of two jobs due at t0, s-last comes first by id")
	c = h.Claim("B", t0+lease, lease)
	h.ExpectExit("A vanished; at lease_until B's claim finds nothing (exit 13)", 13, c.Run,
		"s-last's only attempt is spent and s-late's deadline has passed: handing either out would exceed the "+
			"budget or deliver too late, so the claim quarantines them instead")
	spent := h.ShowAll("s-last", "s-late")
	last, late := spent["s-last"].Job, spent["s-late"].Job
	h.Equal("the claim quarantined s-last as exhausted and released A's lease, keeping its token",
		"dead(exhausted) owner=null lease_until=null token=1 attempts=1",
		fmt.Sprintf("%s owner=%s lease_until=%s token=%d attempts=%d", stateReason(last), show(last.Owner), show(last.LeaseUntil), last.Token, last.Attempts),
		"the lost attempt of a crashed holder counts: the job is quarantined with its evidence, not retried past its budget")
	h.Equal("…and s-late, never claimed, as deadline", "dead(deadline) token=0 attempts=0",
		fmt.Sprintf("%s token=%d attempts=%d", stateReason(late), late.Token, late.Attempts),
		"an order past its deadline is quarantined rather than delivered too late")
}
