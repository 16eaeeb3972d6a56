package labsteps

import (
	"fmt"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step8 = Step{
	Step: result.Step{
		Num: 8, Slug: "crash",
		Title: "Crash after receipt: A dies after the receiver commits; B reclaims at lease_until with token 2; stock +7 once",
		Checks: "Sender A posts order o-1 (qty 7); the receiver commits it; A dies before finish — (a) by its crash " +
			"switch, exit 73; (b) killed with SIGKILL while the receiver holds the answer. The job stays leased to A " +
			"with token 1. Sender B finds nothing at lease_until−1, claims at lease_until with token 2 and sends the " +
			"same id again: the receiver counts two requests but stock rises by 7 once and still records A's token 1 as " +
			"the grant that landed, the job ends done, and A's " +
			"late finish with token 1 is refused (exit 12) and changes nothing. (c) The same with the real clock " +
			"and a short lease.",
		Why: "This is the whole kit in one story: a crash between the effect and its bookkeeping is the case every " +
			"queue meets in production. Nothing is lost because the lease brings the job back; nothing is applied " +
			"twice because the receiver records the id with its effect; and the stale holder cannot undo the " +
			"outcome because the token fences it out.",
	},
	run: runStep8,
}

const crashLease = 30000

// The three variants are independent (own queue file, own receiver) and run
// at once; the report shows them one after the other.
func runStep8(h *harness.Harness) {
	h.Parallel(
		harness.Part{Name: "a: A exits 73 after the receipt", Run: crashByExit},
		harness.Part{Name: "b: the receiver commits and holds the answer; A is killed", Run: crashByKill},
		harness.Part{Name: "c: the real clock, a short lease", Run: realClock},
	)
}

func crashByExit(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§5.listening")
	h.UseQueue("queue-a.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	rcv := h.StartReceiver("receiver-a.db")
	h.Clause("§4.crash-switch")
	a := h.RunSender("A", harness.SenderOpts{URL: rcv.URL, Now: t0, LeaseMs: crashLease, ExitAfterReceipt: 73})
	h.Check("A exits with its crash code 73 right after reading the response", a.Code == 73 && a.Signal == "",
		"exit 73", a.Exit()+"; events: "+a.Events(),
		"the crash switch ends A after the receipt and before finish, with no cleanup: the moment this step is about")
	_, finished := a.Event("finished")
	h.Equal("A did not finish the job", false, finished, "a crash before finish leaves the job undecided")
	afterCrash(h, rcv, "o-1")
}

func crashByKill(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§5.listening", "§5.faults.hold")
	h.UseQueue("queue-b.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	rcvB := h.StartReceiver("receiver-b.db", "--hold-next", "1")
	p := h.StartSender("A", harness.SenderOpts{URL: rcvB.URL, Now: t0, LeaseMs: crashLease})
	rcvB.WaitRequest("o-1", "held", "the receiver must have committed o-1 before A is killed")
	h.Clause("§5.faults.hold", "§4.events.order")
	p.Kill()
	ar := p.Finish("A was killed")
	h.Equal("A ended by SIGKILL while waiting for the answer", "killed by SIGKILL", harness.ExitText(ar.Code, ar.Signal),
		"kill -9 is the crash no program can catch: no deferred finish, no cleanup")
	h.Equal("A printed no response and no finish", "claiming claimed", ar.Events(),
		"A died with the effect committed at the receiver and nothing recorded in the queue")
	afterCrash(h, rcvB, "o-1")
}

// afterCrash is the rest of the story once A has died after the receiver
// committed id: B waits out the lease on the injected clock, reclaims and
// resends, and A's late finish is refused.
func afterCrash(h *harness.Harness, rcv *harness.Receiver, id string) {
	h.Clause("§5.new", "§5.order", "§2.claim.grant", "§2.state.owner-lease")
	lu := int64(t0 + crashLease)
	o := rcv.Order(id)
	h.Equal("the receiver committed the order before A died (one request, qty 7)", "requests=1 qty=7",
		fmt.Sprintf("requests=%d qty=%d", o.Requests, o.Qty), "the effect happened: whatever the queue does next must not apply it again")
	j := h.MustShow(id).Job
	h.Equal("the job is still leased to A under token 1", fmt.Sprintf("leased owner=A token=1 lease_until=%d", lu),
		fmt.Sprintf("%s owner=%s token=%d lease_until=%s", stateReason(j), harness.Repr(j.Owner), j.Token, harness.Repr(j.LeaseUntil)),
		"A died undecided: the job is neither lost nor falsely done, and its lease will bring it back")

	h.Clause("§2.claim.expiry", "§4.run-once.empty")
	opts := harness.SenderOpts{URL: rcv.URL, Now: lu - 1, LeaseMs: crashLease}
	early := h.RunSender("B", opts)
	h.Check("B at lease_until−1 finds nothing (exit 13)", early.Code == 13 && early.Signal == "",
		"events claiming empty; exit 13", early.Events()+"; "+early.Exit(),
		"A's lease has 1 ms left: a claim now would hand the job to two senders at once")
	h.Equal("…and sent nothing", int64(1), rcv.Order(id).Requests, "a sender with no job has nothing to post")

	h.Clause("§2.claim.expiry", "§2.claim.grant", "§4.class.ok", "§5.dup")
	opts.Now = lu
	b := h.RunSender("B", opts)
	cl, _ := b.Event("claimed")
	h.Check("B at lease_until reclaims "+id+" with token 2, attempt 2", cl.Str("id") == id && cl.Int("token") == 2 && cl.Int("attempt") == 2,
		id+" token 2 attempt 2", fmt.Sprintf("%s; %s; %s", b.Events(), harness.Trim(cl.Text), b.Exit()),
		"the expiry instant is expired, and the new grant's token is one more than A's")
	h.Check("B delivers (the receiver answers the repeat with ack true) and finishes ok", b.Code == 0 && b.Events() == "claiming claimed response finished",
		"claiming claimed response finished; exit 0", b.Events()+"; "+b.Exit(),
		"the repeat is the same order: an idempotent receiver acknowledges it without applying it")
	rcv.WaitRequest(id, "duplicate", "the receiver logs B's resend as a duplicate of A's order")
	h.Clause("§5.dup", "§5.count", "§5.stock", "§5.new")
	st, o := rcv.Stock(), rcv.Order(id)
	h.Equal("the receiver counted two requests for "+id+" and stock rose by 7 once", "requests=2 stock=7",
		fmt.Sprintf("requests=%d stock=%d", o.Requests, st.Stock),
		"the request really arrived twice; recording the id with the effect in one transaction is what keeps the stock right")
	h.Equal("the receiver still records A's grant as the one that landed (token 1)", "token=1 qty=7",
		fmt.Sprintf("token=%d qty=%d", o.Token, o.Qty),
		"CONTRACT §4, §5: the receiver records the token of the grant whose order it applied; B's resend is a duplicate that changes nothing, the recorded token included")
	h.Clause("§2.finish.ok", "§2.state.keep", "§2.finish.fence", "§2.finish.not-applied")
	done := h.MustShow(id).Job
	h.Equal("the job is done under token 2", "done token=2", fmt.Sprintf("%s token=%d", stateReason(done), done.Token),
		"B's outcome is recorded: the order is delivered once, and the queue says so")
	late := h.FinishFor("A", id, 1, "ok", lu+1)
	h.ExpectNotApplied("A's late finish with token 1", late, done,
		"A's token 1 is stale: if it could still finish, a sender that paused past its lease could overwrite the outcome of the one that took over")
	h.Summarize(fmt.Sprintf("stock +%d once for %d requests · %s done under token %d · A's late token 1 refused, nothing changed",
		st.Stock, o.Requests, id, done.Token))
}

// realClock repeats the story without --now-ms: the lease really runs out.
func realClock(h *harness.Harness) {
	const lease = 200
	h.Clause("§3.init.json", "§3.enqueue.json", "§5.listening", "§4.crash-switch", "§2.claim.expiry", "§2.claim.grant", "§5.dup", "§2.finish.fence", "§2.state.keep")
	h.UseQueue("queue-c.db")
	h.MarkEpoch()
	h.Init()
	h.MustEnqueue("o-3", 7, -1)
	rcv := h.StartReceiver("receiver-c.db")
	opts := harness.SenderOpts{URL: rcv.URL, Now: -1, LeaseMs: lease}
	a := h.RunSender("A", harness.SenderOpts{URL: rcv.URL, Now: -1, LeaseMs: lease, ExitAfterReceipt: 73})
	h.Check("A (real clock) exits 73 after the receipt", a.Code == 73 && a.Signal == "", "exit 73", a.Exit()+"; "+a.Events(),
		"the crash switch works on the real clock too")
	cl, _ := a.Event("claimed")
	lu := cl.Int("lease_until")

	b := h.RunSender("B", opts)
	if _, claimed := b.Event("claimed"); !claimed || time.Now().UnixMilli() < lu {
		// B ran entirely before the lease ran out (its end is before lease_until): it must have found nothing.
		h.Check("B before A's lease runs out finds nothing (exit 13)", b.Code == 13 && !claimed,
			"exit 13, nothing claimed", b.Events()+"; "+b.Exit(), "the lease holds on the real clock as it does on the injected one")
		h.Action(fmt.Sprintf("wait until the real clock reaches lease_until %d", lu), result.NoClock)
		h.WaitClock(time.UnixMilli(lu))
		b = h.RunSender("B", opts)
	} else {
		h.Narrate("note: B started before lease_until %d but its claim ran after it; its claim is the reclaim", lu)
	}
	cl, _ = b.Event("claimed")
	h.Check("B reclaims o-3 with token 2, not before A's lease_until", cl.Int("token") == 2 && cl.Int("lease_until")-lease >= lu,
		fmt.Sprintf("token 2, claimed at >= %d", lu), fmt.Sprintf("%s; %s", harness.Trim(cl.Text), b.Exit()),
		"with the real clock the lease is real time: the job comes back when it runs out, not before")
	h.Check("B delivers and finishes ok", b.Code == 0 && b.Events() == "claiming claimed response finished",
		"claiming claimed response finished; exit 0", b.Events()+"; "+b.Exit(), "the resend is acknowledged as a duplicate")
	st, o := rcv.Stock(), rcv.Order("o-3")
	h.Equal("two requests, stock +7 once (real clock)", "requests=2 stock=7",
		fmt.Sprintf("requests=%d stock=%d", o.Requests, st.Stock), "idempotence does not depend on the clock")
	done := h.MustShow("o-3").Job
	h.Equal("o-3 is done under token 2", "done token=2", fmt.Sprintf("%s token=%d", stateReason(done), done.Token),
		"the reclaim's outcome is recorded")
	h.ExpectNotApplied("A's late finish with token 1 (real clock)", h.FinishFor("A", "o-3", 1, "ok", -1), done,
		"a stale token is refused whatever the time")
	h.Summarize(fmt.Sprintf("stock +%d once for %d requests · o-3 done under token %d · A's late token 1 refused, nothing changed",
		st.Stock, o.Requests, done.Token))
}
