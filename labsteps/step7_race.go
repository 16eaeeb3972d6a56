package labsteps

import (
	"fmt"
	"strings"
	"time"
)

var step7 = Step{
	Num: 7, Slug: "race",
	Title: "Two real senders race for one job: exactly one claims it, with the interleaving forced, not hoped for",
	Checks: "The harness holds the queue file's write lock (BEGIN IMMEDIATE, writing nothing) while senders A " +
		"and B start `run-once` on one due job. It waits until both have printed {\"event\":\"claiming\"} and " +
		"every thread of both is asleep with no CPU used: whatever each claim reads before it writes, it has " +
		"read. Then it rolls back. Exactly one sender must claim (token 1, delivered once); the other finds " +
		"nothing (exit 13). The same again for a job whose lease expires at that instant: exactly one gets token 2.",
	Why: "A check-then-act claim (read the due job, then update it unconditionally) lets two senders both " +
		"\"win\" when their reads overlap. On a quiet machine that almost never happens, so a lab that merely " +
		"starts two senders passes the bug by luck; holding the lock makes the overlap happen every time.",
	run: runStep7,
}

// blockLimit bounds the wait for both senders to be seen blocked.
const blockLimit = 3 * time.Second

func runStep7(h *Harness) {
	rcv := h.StartReceiver("receiver.db")

	h.Section("a fresh job")
	h.UseQueue("queue-fresh.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	race(h, rcv, "o-1", t0+1, 1)

	h.Section("a lease expiring now")
	h.UseQueue("queue-expired.db")
	h.Init()
	h.MustEnqueue("o-2", 7, t0)
	c := h.Claim("C", t0, 5000)
	h.ExpectExit("C claims o-2 and will never finish it", 0, c.Run, "the race needs a job whose lease runs out")
	race(h, rcv, "o-2", t0+5000, 2)
}

// race starts A and B against the held write lock at now and checks that
// exactly one of them claims id, with wantToken.
func race(h *Harness, rcv *Receiver, id string, now, wantToken int64) {
	lock := h.HoldWriteLock()
	opts := SenderOpts{URL: rcv.URL, Now: now, LeaseMs: 30000}
	a := h.StartSender("A", opts)
	b := h.StartSender("B", opts)
	whyClaiming := "the sender says it is about to claim; only then can the harness know the claim has begun"
	a.WaitEvent("claiming", whyClaiming)
	b.WaitEvent("claiming", whyClaiming)
	if !h.WaitBlocked(blockLimit, a, b) {
		h.Narrate("note: A and B were not both seen blocked; the race is released anyway, but not forced")
	}
	for _, p := range []*Proc{a, b} {
		ex, code, sig := p.Exited()
		if ex {
			h.Check(p.Name+" is still waiting while the harness holds the write lock", false,
				"waiting (busy_timeout is 5 s)", exitText(code, sig)+"; "+p.observed(),
				"nothing can be claimed while another process holds the write lock: a claim must wait for it, not give up or claim without it")
		}
	}
	lock.Release()
	ra := a.Finish("a run-once ends once it has delivered or found nothing")
	rb := b.Finish("a run-once ends once it has delivered or found nothing")

	var winners, empties []string
	for _, r := range []SenderRun{ra, rb} {
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
		"two holders of one job deliver it twice at once and fight over its finish: the claim must be one atomic step")
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
	o := rcv.Order(id)
	h.Equal("the receiver counted one request for "+id+", stock +7 once", "requests=1 qty=7", fmt.Sprintf("requests=%d qty=%d", o.Requests, o.Qty),
		"the loser sent nothing: it never held the job")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
