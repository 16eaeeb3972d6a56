package labsteps

import (
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step3 = Step{
	Step: result.Step{
		Num: 3, Slug: "claim",
		Title: "Claim: lease, owner, token +1; reclaim at lease_until; order by available_at then id; the sweep of spent jobs",
		Checks: "A claim before the job's available_at finds nothing; at available_at it leases the job to its " +
			"owner until now+lease with token 1 and attempts 1. Another owner finds nothing at lease_until−1 and " +
			"reclaims at lease_until exactly, with token 2. A job backing off after a failure is skipped. " +
			"Claims take jobs by available_at, then id — with data where id order, enqueue order and pending versus " +
			"expired lease all disagree with that. The claim's sweep, at both sides of each boundary: at lease_until−1 " +
			"nothing changes (not even a held lease past its deadline); at lease_until a spent lease is dead(exhausted) " +
			"when its budget is used (even if its deadline passed too), dead(deadline) when deadline_at = now, and " +
			"reclaimed when deadline_at = now+1; a pending job is dead(deadline) at deadline_at = now. The sweep keeps " +
			"token and attempts, clears owner and lease, and commits even when the claim then finds nothing (exit 13). " +
			"Owner (64 bytes) and lease (1 ms … one day) are taken at both sides of their bounds.",
		Why: "The lease is what lets a second sender finish the work of one that died; the token, bumped by exactly " +
			"one per grant, is what tells the two apart afterwards. Off by one at either boundary and a job is " +
			"either handed to two senders at once or stuck a tick longer than promised.",
	},
	run: runStep3,
}

func runStep3(h *harness.Harness) {
	h.Parallel(
		harness.Part{Name: "a: lease, reclaim and backoff", Run: claimLease},
		harness.Part{Name: "b: spent jobs are quarantined by the claim", Run: claimSpent},
		harness.Part{Name: "c: a spent lease at its boundaries", Run: claimLeaseBoundary},
		harness.Part{Name: "d: a pending job at its deadline", Run: claimPendingDeadline},
		harness.Part{Name: "e: claim order", Run: claimOrder},
		harness.Part{Name: "f: owner and lease at their bounds", Run: claimBounds},
	)
}

// claimLease: the lease, its expiry instant and a backing-off job.
func claimLease(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json")
	const lease = 5000
	h.Init()
	enq := h.MustEnqueue("o-1", 7, t0)

	h.Clause("§2.claim.due", "§3.claim.json", "§3.stdout.answers")
	c := h.Claim("A", t0-1, lease)
	h.ExpectExit("claim 1 ms before available_at finds nothing (exit 13)", 13, c.Run,
		"a job is not due before its available_at; handing it out early breaks the schedule the queue promised")

	c = h.Claim("A", t0, lease)
	h.ExpectExit("claim at available_at", 0, c.Run, "the job is due at available_at itself")
	h.Clause("§2.claim.grant", "§2.time.updated", "§3.json.job")
	grant := func(j harness.Job) string {
		return fmt.Sprintf("%s %s owner=%s lease_until=%s token=%d attempts=%d updated_at=%d", j.ID, j.State, harness.Repr(j.Owner), harness.Repr(j.LeaseUntil), j.Token, j.Attempts, j.UpdatedAt)
	}
	h.Equal("the claim leases o-1 to A until now+lease with token 1, attempt 1 (updated_at now)",
		fmt.Sprintf("o-1 leased owner=A lease_until=%d token=1 attempts=1 updated_at=%d", t0+lease, t0), grant(c.Job),
		"the owner, the lease and the token are what every later step relies on to tell holders apart; updated_at is the now of the latest operation that changed the job (CONTRACT §2)")
	h.Clause("§2.claim.grant", "§2.time.created", "§2.time.updated", "§2.state.keep", "§2.state.only-named")
	want := enq
	owner, until := "A", int64(t0+lease)
	want.State, want.Owner, want.LeaseUntil, want.Token, want.Attempts, want.UpdatedAt = "leased", &owner, &until, 1, 1, t0
	h.Equal("…and every other field of o-1 as the enqueue made it (id, qty, budget, due time, deadline, window, created_at)",
		want.Fields(), c.Job.Fields(),
		"CONTRACT §2: a claim changes state, owner, lease_until, attempts, token and updated_at, nothing else; created_at is the enqueue's now forever")

	h.Clause("§2.claim.expiry")
	c = h.Claim("B", t0+lease-1, lease)
	h.ExpectExit("B's claim at lease_until−1 finds nothing (exit 13)", 13, c.Run,
		"until lease_until the job belongs to A: a second holder now would deliver the order twice at once")

	c = h.Claim("B", t0+lease, lease)
	h.ExpectExit("B's claim at lease_until exactly reclaims the job", 0, c.Run,
		"the expiry instant itself is expired (lease_until <= now): waiting one more tick delays every recovery and breaks the contract's boundary")
	h.Clause("§2.claim.grant", "§2.time.updated")
	h.Equal("the reclaim leases o-1 to B with token 2, attempt 2 (updated_at now)",
		fmt.Sprintf("o-1 leased owner=B lease_until=%d token=2 attempts=2 updated_at=%d", t0+2*lease, t0+lease), grant(c.Job),
		"each grant bumps the token by exactly one, so A's token 1 is now stale and its late finish can be refused")
	h.Clause("§2.claim.grant", "§2.time.created", "§2.time.updated", "§2.state.keep", "§2.state.only-named")
	ownerB, untilB := "B", int64(t0+2*lease)
	want.Owner, want.LeaseUntil, want.Token, want.Attempts, want.UpdatedAt = &ownerB, &untilB, 2, 2, t0+lease
	h.Equal("…and every other field of o-1 as the enqueue made it (created_at still the enqueue's now)", want.Fields(), c.Job.Fields(),
		"CONTRACT §2: created_at is the now of the enqueue, whatever happens later; a reclaim changes only what a grant names")

	// A job backing off must not block an independent one behind it.
	h.Clause("§2.claim.order")
	now := int64(t0 + 1)
	h.MustEnqueue("p-slow", 7, t0)
	h.MustEnqueue("q-fast", 7, now)
	c = h.Claim("W", now, 30000)
	h.Equal("of two due jobs the one due first is claimed", "p-slow", c.Job.ID,
		"jobs are claimed in order of available_at, then id")
	h.Clause("§2.finish.retry.pending", "§2.backoff.formula")
	f := h.MustFinish("p-slow", c.Job.Token, "retry", now)
	back := f.AvailableAt
	h.Equal("p-slow fails and backs off until now + backoff(p-slow, 1)", now+expectedBackoff("p-slow", 1), back,
		"the retry is scheduled by the contract's backoff")
	c = h.Claim("W", now, 30000)
	h.Clause("§2.claim.skip")
	h.ExpectExit("while p-slow backs off, a claim still gets work", 0, c.Run,
		"independent snack orders must not queue behind a failing one: skipping it is the point of a per-job schedule")
	h.Equal("…and the work is the independent job q-fast", "q-fast", c.Job.ID,
		"a backing-off job is skipped, never waited for")
	h.Clause("§2.claim.due")
	c = h.Claim("W", back-1, 30000)
	h.ExpectExit("claim at p-slow's available_at−1 finds nothing", 13, c.Run,
		"retrying before the backoff has passed is the hammering the backoff exists to prevent")
	c = h.Claim("W", back, 30000)
	h.ExpectExit("claim at p-slow's available_at", 0, c.Run, "the backed-off job is due again at available_at exactly")
	h.Clause("§2.claim.grant")
	h.Equal("…gets p-slow with token 2, attempt 2", "p-slow token=2 attempts=2",
		fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts),
		"each grant counts one attempt against the budget and bumps the token by one")
}

// claimSpent: a claim that finds nothing still quarantines what is spent
// (CONTRACT §2 claim, 1), and commits that.
func claimSpent(h *harness.Harness) {
	const lease = 5000
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-spent.db")
	h.Init()
	h.MustEnqueue("s-last", 7, t0, "--max-attempts", "1")
	h.MustEnqueue("s-late", 7, t0, "--deadline-ms", "3000")
	h.Clause("§2.claim.grant", "§2.claim.order")
	c := h.Claim("A", t0, lease)
	h.Equal("A claims s-last, its one and only attempt", "s-last token=1 attempts=1",
		fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts), "of two jobs due at t0, s-last comes first by id")
	c = h.Claim("B", t0+lease, lease)
	h.Clause("§2.claim.sweep.exhausted", "§2.claim.sweep.deadline", "§3.claim.json")
	h.ExpectExit("A vanished; at lease_until B's claim finds nothing (exit 13)", 13, c.Run,
		"s-last's only attempt is spent and s-late's deadline has passed: handing either out would exceed the "+
			"budget or deliver too late, so the claim quarantines them instead")
	spent := h.ShowAll("s-last", "s-late")
	last, late := spent["s-last"].Job, spent["s-late"].Job
	h.Clause("§2.claim.sweep.exhausted", "§2.claim.sweep.keeps", "§2.claim.sweep.commits", "§2.state.owner-lease")
	h.Equal("the claim quarantined s-last as exhausted and released A's lease, keeping its token",
		"dead(exhausted) owner=null lease_until=null token=1 attempts=1",
		fmt.Sprintf("%s owner=%s lease_until=%s token=%d attempts=%d", stateReason(last), harness.Repr(last.Owner), harness.Repr(last.LeaseUntil), last.Token, last.Attempts),
		"the lost attempt of a crashed holder counts: the job is quarantined with its evidence, not retried past its budget")
	h.Clause("§2.claim.sweep.deadline", "§2.claim.sweep.commits")
	h.Equal("…and s-late, never claimed, as deadline", "dead(deadline) token=0 attempts=0",
		fmt.Sprintf("%s token=%d attempts=%d", stateReason(late), late.Token, late.Attempts),
		"an order past its deadline is quarantined rather than delivered too late")
	h.Clause("§2.time.updated")
	h.Equal("the sweep's updated_at on both is the now of the claim that quarantined them",
		fmt.Sprintf("s-last=%d s-late=%d", t0+lease, t0+lease), fmt.Sprintf("s-last=%d s-late=%d", last.UpdatedAt, late.UpdatedAt),
		"CONTRACT §2: updated_at is the now of the latest operation that changed the job, the claim's sweep included: the time a job entered quarantine")
}

// kept is what the claim's sweep leaves as it was: everything but state,
// reason, owner, lease_until and updated_at.
func kept(j harness.Job) string {
	return fmt.Sprintf("id=%s qty=%d token=%d attempts=%d/%d available_at=%d deadline_at=%d deadline_window_ms=%d created_at=%d",
		j.ID, j.Qty, j.Token, j.Attempts, j.MaxAttempts, j.AvailableAt, j.DeadlineAt, j.DeadlineWindowMs, j.CreatedAt)
}

// quarantined describes a job as the sweep judges it.
func quarantined(j harness.Job) string {
	return fmt.Sprintf("%s owner=%s lease_until=%s %s", stateReason(j), harness.Repr(j.Owner), harness.Repr(j.LeaseUntil), kept(j))
}

// claimLeaseBoundary: four leases run out at once, each judged by the claim
// at lease_until (CONTRACT §2 claim, 1): budget and deadline both spent,
// deadline exactly now, deadline one ms later, budget spent.
func claimLeaseBoundary(h *harness.Harness) {
	const lease = 5000
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json")
	h.UseQueue("queue-lease-boundary.db")
	h.Init()
	h.MustEnqueue("s1-both", 7, t0, "--max-attempts", "1", "--deadline-ms", "200")
	h.MustEnqueue("s2-dl", 7, t0, "--deadline-ms", fmt.Sprint(lease))
	h.MustEnqueue("s3-dl1", 7, t0, "--deadline-ms", fmt.Sprint(lease+1))
	h.MustEnqueue("s4-last", 7, t0, "--max-attempts", "1")
	ids := []string{"s1-both", "s2-dl", "s3-dl1", "s4-last"}
	held := h.ClaimAll("A", len(ids), t0, lease)

	h.Clause("§2.claim.sweep.live-lease", "§2.claim.expiry")
	c := h.Claim("B", t0+lease-1, lease)
	h.ExpectExit("at lease_until−1 every lease is still A's: B's claim finds nothing (exit 13)", 13, c.Run,
		"until lease_until a job belongs to its holder: a second holder now would deliver the order twice at once")
	now := h.ShowAll(ids...)
	for _, id := range ids {
		h.Equal(fmt.Sprintf("…and leaves %s exactly as A's claim made it", id), held[id].Canon, now[id].Job.Canon,
			"the sweep takes only spent leases (lease_until <= now): a held lease is its holder's until it runs out, "+
				"even when its deadline has passed meanwhile (s1-both's did at t0+200) — the holder may still be delivering it")
	}

	c = h.Claim("B", t0+lease, lease)
	h.Clause("§2.claim.expiry", "§2.claim.sweep.exhausted", "§2.claim.sweep.deadline", "§2.claim.grant")
	h.ExpectExit("at lease_until B's claim gets a job", 0, c.Run,
		"s3-dl1's lease ran out with budget left and its deadline one ms away: it can be delivered again")
	h.Equal("…s3-dl1, the one spent lease with budget and time left, with token 2, attempt 2",
		"s3-dl1 token=2 attempts=2", fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts),
		"deadline_at = now+1 is not yet the deadline; the other three are quarantined by this claim, not handed out")
	after := h.ShowAll("s1-both", "s2-dl", "s4-last")
	h.Clause("§2.claim.sweep.exhausted", "§2.claim.sweep.deadline", "§2.claim.sweep.keeps", "§2.state.owner-lease")
	whyKept := " The sweep releases owner and lease_until and changes nothing else: the token stays (the next grant, " +
		"after a redrive, is token+1), attempts stay (the vanished holder's attempt was counted at its claim)."
	for _, w := range []struct{ id, state, why string }{
		{"s1-both", "dead(exhausted)", "its only attempt is spent and its deadline passed too: the budget is checked first, so the reason names the limit really used up."},
		{"s2-dl", "dead(deadline)", "budget left, but deadline_at = now: the deadline is not a time to deliver at (deadline_at <= now)."},
		{"s4-last", "dead(exhausted)", "the vanished holder used its only attempt: handing it out again would exceed the budget."},
	} {
		j := held[w.id]
		want := fmt.Sprintf("%s owner=null lease_until=null %s", w.state, kept(j))
		h.Equal(fmt.Sprintf("the claim at lease_until quarantined %s as %s", w.id, w.state), want, quarantined(after[w.id].Job), w.why+whyKept)
	}

	c = h.Claim("C", t0+2*lease, lease)
	h.Clause("§2.claim.sweep.deadline", "§2.claim.sweep.commits")
	h.ExpectExit("at B's lease_until, past s3-dl1's deadline, C's claim finds nothing (exit 13)", 13, c.Run,
		"B vanished too, and s3-dl1's deadline (t0+5001) has passed: the claim quarantines it instead of handing it out")
	j := h.MustShow("s3-dl1").Job
	h.Equal("…and that claim, which found nothing, still quarantined s3-dl1", "dead(deadline) owner=null lease_until=null token=2 attempts=2",
		fmt.Sprintf("%s owner=%s lease_until=%s token=%d attempts=%d", stateReason(j), harness.Repr(j.Owner), harness.Repr(j.LeaseUntil), j.Token, j.Attempts),
		"the sweep is part of the claim and is committed whether or not a job is then handed out: rolled back with "+
			"the empty claim, a spent job would stay leased to a process that is gone, in no one's sight")
}

// claimPendingDeadline: a pending job whose deadline is now is quarantined,
// one whose deadline is now+1 is claimed.
func claimPendingDeadline(h *harness.Harness) {
	const window = 3000
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-pending-deadline.db")
	h.Init()
	h.MustEnqueue("d1-at", 7, t0, "--deadline-ms", fmt.Sprint(window))
	h.MustEnqueue("d2-after", 7, t0, "--deadline-ms", fmt.Sprint(window+1))
	before := h.MustShow("d1-at").Job
	h.Clause("§2.claim.sweep.deadline", "§2.claim.sweep.keeps")
	c := h.Claim("W", t0+window, 30000)
	h.ExpectExit(fmt.Sprintf("claim at t0+%d, d1-at's deadline_at", window), 0, c.Run, "d2-after is due and within its deadline")
	h.Equal("…gets d2-after (deadline_at = now+1), not d1-at (deadline_at = now), although d1-at comes first by id", "d2-after", c.Job.ID,
		"a pending job whose deadline_at <= now is quarantined by the claim, not delivered; one ms before its deadline a job is still deliverable")
	j := h.MustShow("d1-at").Job
	h.Equal("the claim quarantined d1-at as dead(deadline), keeping everything else", "dead(deadline) owner=null lease_until=null "+kept(before),
		quarantined(j), "an order at its deadline is quarantined with its evidence rather than delivered too late; it was never granted, so token and attempts stay 0")
}

// claimOrder: which job a claim takes when several are claimable (CONTRACT
// §2 claim, 2): by available_at, then id — with data where id order,
// enqueue order and the kind of job (pending or an expired lease) all
// disagree with it.
func claimOrder(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json", "§2.claim.skip")
	h.UseQueue("queue-order.db")
	h.Init()
	h.MustEnqueue("c-retry", 7, t0)
	c := h.Claim("A", t0, 30000)
	h.ExpectExit("A claims c-retry, the only job", 0, c.Run, "the scenario needs a job that backed off")
	f := h.MustFinish("c-retry", c.Job.Token, "retry", t0)
	h.MustEnqueue("x-lease", 7, t0)
	c = h.Claim("A", t0, 100)
	h.Equal("A leases x-lease for 100 ms (c-retry is backing off)", "x-lease", c.Job.ID, "a job backing off is skipped")
	h.MustEnqueue("m-2", 7, t0)
	h.MustEnqueue("m-1", 7, t0)
	h.MustEnqueue("z-early", 7, t0+1)
	h.MustEnqueue("a-late", 7, t0+5)
	at := int64(t0 + 2000)
	h.Narrate("at t0+2000: due m-2, m-1 (available_at t0), x-lease (lease ran out at t0+100; available_at t0), z-early (t0+1), a-late (t0+5), c-retry (t0+%d)", f.AvailableAt-t0)
	h.Clause("§2.claim.order")
	order := []struct{ id, why string }{
		{"m-1", "m-1, m-2 and the expired x-lease all have available_at t0: equal available_at goes by id, so m-1 — not m-2, enqueued before it, nor a pending-first or lease-first rule"},
		{"m-2", "m-2 and x-lease are left at available_at t0: m-2 by id"},
		{"x-lease", "an expired lease competes by its available_at like a pending job (a claim does not change available_at): x-lease (t0) comes before z-early (t0+1), although z-early is pending"},
		{"z-early", "z-early is due at t0+1 and a-late at t0+5: the job due first is claimed first, whatever its id"},
		{"a-late", "a-late (t0+5) before c-retry, due only after its backoff"},
		{"c-retry", "c-retry was enqueued first, but its retry made it due at t0+backoff: the order is available_at, not enqueue time"},
	}
	var got []string
	var reclaim harness.Job
	for i, o := range order {
		c := h.Claim("B", at, 30000)
		h.ExpectExit(fmt.Sprintf("claim %d of %d at t0+2000", i+1, len(order)), 0, c.Run, "six jobs are claimable")
		got = append(got, c.Job.ID)
		if c.Job.ID == "x-lease" {
			reclaim = c.Job
		}
		h.Equal(fmt.Sprintf("claim %d of %d takes %s (so far: %s)", i+1, len(order), o.id, strings.Join(got, ", ")), o.id, c.Job.ID,
			"a claim takes the claimable job with the smallest available_at, then the smallest id (CONTRACT §2 claim, 2): "+o.why)
	}
	h.Clause("§2.claim.grant")
	h.Equal("x-lease's reclaim by B: owner, token, attempts", "owner=B token=2 attempts=2",
		fmt.Sprintf("owner=%s token=%d attempts=%d", harness.Repr(reclaim.Owner), reclaim.Token, reclaim.Attempts),
		"a reclaim of an expired lease is a new grant: the token and the attempt count go up by one")
}

// claimBounds: owner and lease at both sides of their bounds (CONTRACT §1).
func claimBounds(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-bounds.db")
	h.Init()
	h.MustEnqueue("b-1", 7, t0)
	h.MustEnqueue("b-2", 7, t0)
	h.MustEnqueue("b-3", 7, t0)
	whyOwner := "an owner is an identifier like an order id (CONTRACT §1): 1–64 bytes of A–Z a–z 0–9 . _ : - starting with a letter or digit, safe in logs and alerts"
	whyLease := "a lease is 1 ms to one day (CONTRACT §1): a lease of 0 is spent the moment it is granted, and a longer one hides a crashed holder's job for days"
	h.Clause("§1.owner", "§1.lease", "§1.invalid", "§3.stdout.refusal", "§6.nothing-written")
	claim := func(owner, lease string) harness.Call {
		return harness.Call{Verb: "claim", Now: t0, Args: []string{"--owner", owner, "--lease-ms", lease}}
	}
	h.ExpectRefused([]harness.Refusal{
		{What: "a 65-byte owner", Call: claim(strings.Repeat("o", 65), "1000"), Code: 3, Why: whyOwner},
		{What: "owner \"-A\" (not starting with a letter or digit)", Call: claim("-A", "1000"), Code: 3, Why: whyOwner},
		{What: "owner \"A B\" (a space)", Call: claim("A B", "1000"), Code: 3, Why: whyOwner},
		{What: "lease 0 ms", Call: claim("A", "0"), Code: 3, Why: whyLease},
		{What: "lease 86400001 ms (one day and 1 ms)", Call: claim("A", "86400001"), Code: 3, Why: whyLease},
	}, nil)
	accepted := []struct {
		owner string
		lease int64
		what  string
		why   string
	}{
		{strings.Repeat("o", 64), 1, "a 64-byte owner and a lease of 1 ms", whyOwner + "; " + whyLease},
		{"9", 86400000, "owner \"9\" and a lease of 86400000 ms (one day)", whyOwner + "; " + whyLease},
	}
	h.Clause("§1.owner", "§1.lease", "§2.claim.grant")
	runs := h.Calls([]harness.Call{claim(accepted[0].owner, "1"), claim(accepted[1].owner, "86400000")})
	for i, a := range accepted {
		h.ExpectExit("a claim with "+a.what+" is accepted", 0, runs[i], a.why)
		var cl harness.Claimed
		h.Parse(runs[i], &cl)
		h.Equal("…and leases a job to that owner until now+lease", fmt.Sprintf("owner=%s lease_until=%d", a.owner, t0+a.lease),
			fmt.Sprintf("owner=%s lease_until=%s", harness.Repr(cl.Job.Owner), harness.Repr(cl.Job.LeaseUntil)), a.why)
	}
	h.Clause("§3.claim.flags")
	r := h.Queuectl("claim", t0, "--owner", "D")
	h.ExpectExit("a claim without --lease-ms is accepted", 0, r, "the lease has a default")
	var cl harness.Claimed
	h.Parse(r, &cl)
	h.Equal("…and leases for the default 30000 ms", fmt.Sprintf("owner=D lease_until=%d", t0+30000),
		fmt.Sprintf("owner=%s lease_until=%s", harness.Repr(cl.Job.Owner), harness.Repr(cl.Job.LeaseUntil)),
		"CONTRACT §3: --lease-ms defaults to 30000; the default decides how long a crashed holder's job stays away, and every program that claims must agree on it")
}
