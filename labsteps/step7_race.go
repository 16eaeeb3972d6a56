package labsteps

import (
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step7 = Step{
	Step: result.Step{
		Num: 7, Slug: "race",
		Title: "Two processes at one queue file: exactly one sender claims a job, with the interleaving forced, and every writer waits for the write lock",
		Checks: "The harness holds the queue file's write lock (BEGIN IMMEDIATE, writing nothing) while senders A and B, " +
			"under strace, start `run-once` on one due job. Once both traces show a refused attempt to take the write " +
			"lock, whatever each claim reads before it writes, it has read; then the harness releases the lock. The " +
			"winner posts to the harness's holding server, which keeps the answer until the other sender's claim has " +
			"run, so the winner cannot finish (and free the job) first. Exactly one must claim (token 1, posted once); " +
			"the other finds nothing (exit 13). The same again for a job whose lease expires at that instant: exactly " +
			"one gets token 2. Then every writing verb — queuectl claim, finish, redrive, investigate, and the sender's " +
			"finish — meets the held lock twice: with --busy-timeout-ms 100 it must wait at least 100 ms after its first " +
			"refused attempt and exit 6 having written nothing; with the default timeout (or --busy-timeout-ms 0, which means " +
			"the default: redrive, investigate and a second sender) it must succeed once the lock " +
			"is released (released only after its trace shows it tried). " +
			"Two writers of one job at once, each held at a refused attempt and then released: two enqueues of one new id both exit 0, one " +
			"answering duplicate; two finishes under one token: one applied, the other exit 12; two redrives of one dead job: one, the other exit 9, one audit row.",
		Why: "A check-then-act claim (read the due job, then update it unconditionally), a compare-and-set on the state " +
			"alone, or a token computed from an earlier read lets two senders both \"win\" when their reads overlap. On " +
			"a quiet machine that almost never happens, so a lab that merely starts two senders passes the bug by luck; " +
			"holding the lock makes the overlap happen every time. And a writer that gives up at the first refusal " +
			"(no busy timeout, or a deferred transaction that reads first and cannot upgrade) fails whenever two " +
			"processes meet, which in production is all the time.",
	},
	run: runStep7,
}

func runStep7(h *harness.Harness) {
	h.RequireStrace("step 7 judges who waits for the write lock from the system calls each process makes")
	h.Parallel(
		harness.Part{Name: "a race for a fresh job", Run: raceFresh},
		harness.Part{Name: "a race for a lease expiring now", Run: raceExpired},
		harness.Part{Name: "claim meets the held write lock", Run: claimWaits},
		harness.Part{Name: "finish meets the held write lock", Run: finishWaits},
		harness.Part{Name: "redrive meets the held write lock", Run: redriveWaits},
		harness.Part{Name: "investigate meets the held write lock", Run: investigateWaits},
		harness.Part{Name: "the sender's finish gives up past its busy timeout", Run: senderFinishGivesUp},
		harness.Part{Name: "the sender's finish waits for the write lock", Run: senderFinishWaits},
		harness.Part{Name: "the sender's finish waits with --busy-timeout-ms 0", Run: senderFinishWaitsZero},
		harness.Part{Name: "two enqueues of one new id at once", Run: enqueueRace},
		harness.Part{Name: "two finishes under one token at once", Run: finishRace},
		harness.Part{Name: "two redrives of one dead job at once", Run: redriveRace},
	)
}

func raceFresh(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-fresh.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	race(h, "o-1", t0+1, 1)
}

func raceExpired(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json")
	h.UseQueue("queue-expired.db")
	h.Init()
	h.MustEnqueue("o-2", 7, t0)
	c := h.Claim("C", t0, 5000)
	h.ExpectExit("C claims o-2 and will never finish it", 0, c.Run, "the race needs a job whose lease runs out")
	race(h, "o-2", t0+5000, 2)
}

// race starts A and B against the held write lock at now and checks that
// exactly one of them claims id, with wantToken.
func race(h *harness.Harness, id string, now, wantToken int64) {
	h.Clause("§2.claim.atomic", "§2.busy.wait", "§2.claim.grant", "§4.run-once.empty", "§2.state.keep")
	srv := h.StartHoldServer()
	lock := h.HoldWriteLock()
	// The held answer must outlast the other claim however slow it is (a
	// POST timeout would turn the winner's delivery into a retry), and the
	// first to try the lock must outwait the other's start: neither limit is
	// what this part judges (TimeoutMs 0 is the harness's patience).
	opts := harness.SenderOpts{URL: srv.URL, Now: now, LeaseMs: 30000, BusyTimeoutMs: h.PatienceMs()}
	a := h.StartTracedSender("A", opts, harness.LockCalls)
	b := h.StartTracedSender("B", opts, harness.LockCalls)
	why := "once a claim asks for the write lock, whatever it reads first it has read: both reads happen before either claim can commit"
	a.WaitRefused("A's claim tries the write lock the harness holds", why)
	b.WaitRefused("B's claim tries the write lock the harness holds", why)
	for _, p := range []*harness.Traced{a, b} {
		h.ExpectStillWaiting(p.Name+" is still waiting while the harness holds the write lock", p,
			"nothing can be claimed while another process holds the write lock: a claim must wait for it, not give up (a deferred transaction that reads first cannot wait: begin it IMMEDIATE) or claim without it")
	}
	lock.Release()
	// The first claim to commit posts to the holding server, which keeps
	// the answer: the winner cannot finish, and so free the job, before the
	// other sender's claim has run (it has claimed too, or ended).
	for _, p := range []*harness.Traced{a, b} {
		end := p.WaitLines(func(lines []harness.Line) bool {
			for _, l := range lines {
				if l.Str("event") == "claimed" {
					return true
				}
			}
			return false
		})
		if end == harness.LimitHit || end == harness.StepEnded {
			// Releasing the holding server now would let the winner
			// finish before the other claimed: judge nothing of it.
			h.Timeout(p.Name+" claims or ends once the write lock is free", "a claimed line, or the end of the process",
				p.Observed(), "the race is judged only once both claims have run")
		}
	}
	h.Action("both claims have run (each sender has claimed or ended); the winner's answer was held until now", result.NoClock)
	srv.Release()
	ra := a.Finish("a run-once ends once it has delivered or found nothing")
	rb := b.Finish("a run-once ends once it has delivered or found nothing")

	var winners, empties []string
	for _, r := range []harness.SenderRun{ra, rb} {
		if l, ok := r.Event("claimed"); ok {
			winners = append(winners, fmt.Sprintf("%s (token %d)", r.Proc.Name, l.Int("token")))
		}
		if _, ok := r.Event("empty"); ok && r.Code == 13 {
			empties = append(empties, r.Proc.Name)
		}
	}
	obs := fmt.Sprintf("claimed: %s; empty with exit 13: %s [A: %s, %s; B: %s, %s]",
		orNone(winners), orNone(empties), ra.Events(), ra.Exit(), rb.Events(), rb.Exit())
	h.Check("exactly one sender claims "+id+"; the other finds nothing", len(winners) == 1 && len(empties) == 1,
		fmt.Sprintf("one of A, B claimed (token %d); the other empty with exit 13", wantToken), obs,
		"two holders of one job deliver it twice at once and fight over its finish: the claim must be one atomic step (one immediate transaction, or one UPDATE … WHERE that re-checks the job is claimable)")
	winner := ra
	if _, ok := rb.Event("claimed"); ok {
		winner = rb
	}
	l, _ := winner.Event("claimed")
	h.Equal("the winner's token", wantToken, l.Int("token"), "one grant, one token: the next grant after "+fmt.Sprint(wantToken-1))
	h.Check("the winner delivers and finishes", winner.Code == 0, "exit 0", winner.Exit(), "the race must not disturb the delivery")
	j := h.MustShow(id).Job
	h.Equal(id+" is done with the winner's token", fmt.Sprintf("done token=%d", wantToken),
		fmt.Sprintf("%s token=%d", stateReason(j), j.Token), "one claim, one grant: the token shows how many grants there were")
	h.Equal("the holding server received one request for "+id, 1, srv.Requests(id), "the loser sent nothing: it never held the job")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// verbMeetsLock runs `queuectl VERB args…` twice against the held write lock:
// with --busy-timeout-ms shortBusyMs it must give up after waiting, writing nothing;
// with the default busy timeout it must succeed once the lock is released.
// zero gives the second run --busy-timeout-ms 0, which means the default
// (CONTRACT §3: 0 means 5000), not "do not wait".
func verbMeetsLock(h *harness.Harness, verb string, now int64, zero bool, args ...string) {
	h.Clause("§2.busy.wait", "§2.busy.fail", "§2.busy.succeed", "§6.nothing-written")
	lock := h.HoldWriteLock()
	before := lock.Digest()
	// One after the other under the one held lock: the one that gives up
	// finds the file as it was, and the other's default busy timeout starts
	// only then, so it waits for nothing but the harness's release.
	short := h.StartTraced(verb, result.LaneQueuectl, "queuectl", now, nil, harness.LockCalls, append(h.QueuectlArgs(verb, now, args...), harness.BusyFlag...)...)
	h.ExpectGivesUp(fmt.Sprintf("%s with --busy-timeout-ms %d", verb, harness.ShortBusyMs), short, lock, before)
	what, longArgs := verb+" with the default busy timeout", h.QueuectlArgs(verb, now, args...)
	if zero {
		h.Clause("§2.busy.wait", "§2.busy.fail", "§2.busy.succeed", "§6.nothing-written", "§3.flags")
		what, longArgs = verb+" with --busy-timeout-ms 0 (the default 5000 ms)", append(longArgs, "--busy-timeout-ms", "0")
	}
	long := h.StartTraced(verb, result.LaneQueuectl, "queuectl", now, nil, harness.LockCalls, longArgs...)
	h.ExpectWaitsThenSucceeds(what, lock, long)
}

func claimWaits(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-claim.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	verbMeetsLock(h, "claim", t0+1, false, "--owner", "Q", "--lease-ms", "30000")
	j := h.MustShow("o-1").Job
	h.Equal("o-1 is leased to Q with token 1 (claimed once, by the claim that waited)", "leased Q 1",
		fmt.Sprintf("%s %s %d", j.State, harness.Repr(j.Owner), j.Token), "the claim that gave up wrote nothing; the one that waited claimed")
}

func finishWaits(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json")
	h.UseQueue("queue-finish.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	c := h.Claim("Q", t0+1, 30000)
	h.ExpectExit("Q claims o-1", 0, c.Run, "the finish needs a leased job")
	verbMeetsLock(h, "finish", t0+2, false, "--id", "o-1", "--token", "1", "--outcome", "ok")
	j := h.MustShow("o-1").Job
	h.Equal("o-1 is done (finished once, by the finish that waited)", "done token=1",
		fmt.Sprintf("%s token=%d", stateReason(j), j.Token), "the finish that gave up wrote nothing; the one that waited applied")
}

func redriveWaits(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json")
	h.UseQueue("queue-redrive.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0, "--max-attempts", "1")
	c := h.Claim("Q", t0+1, 30000)
	h.ExpectExit("Q claims o-1", 0, c.Run, "the redrive needs a dead job")
	h.MustFinish("o-1", 1, "permanent", t0+2)
	verbMeetsLock(h, "redrive", t0+3, true, "--id", "o-1", "--note", "T-1")
	s := h.MustShow("o-1")
	h.Equal("o-1 is pending with one redrive (by the redrive that waited)", "pending redrives=1",
		fmt.Sprintf("%s redrives=%d", stateReason(s.Job), len(s.Redrives)), "the redrive that gave up wrote nothing, not even its audit row")
}

func investigateWaits(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json")
	h.UseQueue("queue-investigate.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	verbMeetsLock(h, "investigate", t0+1, true, "--id", "o-1", "--note", "T-1")
	r := h.Queuectl("show", -1, "--id", "o-1")
	h.ExpectFound("o-1", r)
	var v struct {
		Investigations []struct {
			Note string `json:"note"`
		} `json:"investigations"`
	}
	h.Parse(r, &v)
	h.Equal("o-1 has one investigation (by the investigate that waited)", 1, len(v.Investigations),
		"the investigate that gave up wrote nothing; the one that waited recorded its row")
}

// senderAtFinish starts sender A on o-1 and waits until its answer is held:
// A has claimed (the lock was free) and will finish once the answer comes.
func senderAtFinish(h *harness.Harness, db string, extra ...string) (*harness.HoldServer, *harness.Traced) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§4.url")
	h.UseQueue(db)
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	srv := h.StartHoldServer()
	// Its --timeout-ms is the harness's patience (the answer is held), its
	// busy timeout the contract's default unless extra gives one.
	a := h.StartTracedSender("A", harness.SenderOpts{URL: srv.URL, Now: t0 + 1, LeaseMs: 30000}, harness.LockCalls, extra...)
	srv.WaitHeld(1, "A claims o-1 and posts it to the holding server", "the finish can meet the lock only once A has delivered")
	return srv, a
}

func senderFinishGivesUp(h *harness.Harness) {
	srv, a := senderAtFinish(h, "queue-sender-busy.db", harness.BusyFlag...)
	h.Clause("§2.busy.wait", "§2.busy.fail", "§6.nothing-written", "§4.flags")
	lock := h.HoldWriteLock()
	before := lock.Digest()
	srv.Release() // A gets 200 {"ack":true} and finishes ok: that needs the lock
	h.ExpectGivesUp(fmt.Sprintf("A's finish with --busy-timeout-ms %d", harness.ShortBusyMs), a, lock, before)
	lock.Release()
	j := h.MustShow("o-1").Job
	h.Equal("o-1 is still leased to A with token 1 (the finish wrote nothing)", "leased A 1",
		fmt.Sprintf("%s %s %d", j.State, harness.Repr(j.Owner), j.Token), "a finish that could not commit changed nothing; the lease will run out and the job come back")
}

func senderFinishWaits(h *harness.Harness) {
	senderFinishWaitsFor(h, "queue-sender-wait.db", "the default busy timeout", "§4.flags.defaults")
}

// senderFinishWaitsZero: the sender's --busy-timeout-ms 0 means the default
// 5000 ms (CONTRACT §4), not "do not wait".
func senderFinishWaitsZero(h *harness.Harness) {
	senderFinishWaitsFor(h, "queue-sender-zero.db", "--busy-timeout-ms 0 (the default 5000 ms)", "§4.flags", "--busy-timeout-ms", "0")
}

// senderFinishWaitsFor: A's finish, started with extra flags, meets the
// held write lock and succeeds once it is released.
func senderFinishWaitsFor(h *harness.Harness, db, busy, clause string, extra ...string) {
	srv, a := senderAtFinish(h, db, extra...)
	h.Clause("§2.busy.wait", "§2.busy.succeed", clause)
	lock := h.HoldWriteLock()
	srv.Release()
	h.ExpectWaitsThenSucceeds("A's finish with "+busy, lock, a)
	j := h.MustShow("o-1").Job
	h.Equal("o-1 is done with token 1", "done token=1", fmt.Sprintf("%s token=%d", stateReason(j), j.Token),
		"the finish waited for the lock and applied")
}
