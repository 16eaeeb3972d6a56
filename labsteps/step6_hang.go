package labsteps

import (
	"fmt"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// lateAnswer is how late the fake answers late-1: past the sender's 5 s
// default --timeout-ms, far inside the harness's patience that S is given.
// A sender that waits only the default gives up first whatever the load:
// its 5 s run from before it connects, these from after the fake read it.
const lateAnswer = 5500 * time.Millisecond

func transportCases(h *harness.Harness) {
	h.Clause("§3.init.json", "§4.class.retry", "§4.crash-switch", "§4.flags", "§4.events.order", "§4.events.claimed", "§4.events.response", "§4.events.finished", "§4.run-once.applied", "§4.url", "§4.body")
	h.UseQueue("queue-e.db")
	h.Init()
	fake := h.StartFakeReceiver()
	// The hang's --timeout-ms is judged (it must run out). The fake may
	// read the POST after the sender gave up (on a loaded machine 300 ms was
	// shorter than the lab took to read it): judgePost waits for it, so the
	// timeout can be short. It was the calibrated block wait (10 s here),
	// the longest part of step 6 and so of every submission's grading.
	// Now 1 s times the load factor the floors are scaled by.
	hangMs := int64(max(1, h.Limits.Scale) * 1000) // 1 s, longer on a loaded machine
	runCases(h, fake.URL, fake, nil, []sendCase{
		{id: "hang-1", answer: harness.Answer{Hang: true}, timeoutMs: hangMs, code: 0, status: 0, ack: "null", class: "retryable", state: "pending",
			why: "a receiver that accepts and never answers is a timeout once --timeout-ms has passed: Retryable, finish retry, not an unexpected error that leaves the job leased"},
		{id: "reset-1", answer: harness.Answer{Reset: true}, code: 0, status: 0, ack: "null", class: "retryable", state: "pending",
			why: "a reset connection is temporary (the receiver may have crashed mid-request): finish retry"},
		{id: "crash-0", url: h.RefusedURL(), crash: 42, code: 42, status: 0, ack: "null", state: leftLeased,
			why: "the crash switch fires after every response event, including one with status 0: the sender exits with its code and no finish runs"},
	})
}

// lateCase: --timeout-ms is honoured the other way too. A sender that waits
// only the default 5 s (or any bound of its own) instead of the flag's
// value gives up on an answer the flag said to wait for. A part of its own,
// on a queue of its own, so that its 5.5 s overlap the other parts.
func lateCase(h *harness.Harness) {
	h.Clause("§3.init.json", "§4.class.ok", "§4.flags", "§4.events.order", "§4.events.response", "§4.events.finished", "§4.run-once.applied", "§4.url", "§4.body")
	h.UseQueue("queue-e2.db")
	h.Init()
	fake := h.StartFakeReceiver()
	runCases(h, fake.URL, fake, nil, []sendCase{
		{id: "late-1", answer: harness.Answer{Status: 200, Body: `{"ack":true}`, Delay: lateAnswer}, code: 0, status: 200, ack: "true", class: "ok", state: "done",
			why: "CONTRACT §4: --timeout-ms bounds the wait for an answer, and here it is far longer than the answer takes: an answer 5.5 s late, past the 5 s default, is still awaited and counts: ok, not a timeout"},
	})
}

// staleFinish holds the fake's answer while the harness reclaims the job at
// the end of S's lease, so S finishes with a token that is no longer current.
func staleFinish(h *harness.Harness) {
	const lease = 30000
	h.Clause("§3.init.json")
	h.UseQueue("queue-j.db")
	h.Init()
	fake := h.StartFakeReceiver()
	hold, release := heldAnswer(h)
	fake.On("stale-1", harness.Answer{Status: 200, Body: `{"ack":true}`, Hold: hold})
	h.MustEnqueue("stale-1", 7, t0)
	p := h.StartSender("S", harness.SenderOpts{URL: fake.URL, Now: t0, LeaseMs: lease, TimeoutMs: 600000})
	fake.WaitRequest("stale-1", "S must have claimed stale-1 and posted it before its token can go stale")
	h.Clause("§2.claim.expiry", "§2.claim.grant")
	c := h.Claim("H", t0+lease, lease)
	h.Check("the harness reclaims stale-1 at S's lease_until with token 2", c.Run.Code == 0 && c.Claimed && c.Job.ID == "stale-1" && c.Job.Token == 2,
		"stale-1 claimed with token 2", fmt.Sprintf("%s %s", c.Run.Exit(), harness.Trim(c.Run.Stdout)),
		"S's lease has run out on the injected clock, so the job comes back with a new token while S still waits for its answer")
	h.Action("release the held answer: 200 {\"ack\":true}", result.NoClock)
	release()
	h.Clause("§4.run-once.stale", "§2.finish.fence", "§4.events.finished")
	run := p.Finish("S's run-once ends once its finish has been refused")
	why := "CONTRACT §4, §6: when run-once's finish is not applied (its token went stale while it posted) it prints the finished event with applied false and exits 12, so an operator sees that this sender's outcome was discarded"
	h.Check("S's finish with token 1 is not applied: exit 12", run.Code == 12 && run.Signal == "", "exit 12",
		run.Exit()+"; events: "+run.Events(), why)
	h.Equal("S's events", "claiming claimed response finished", run.Events(), why)
	fin, _ := run.Event("finished")
	h.Equal("S's finished event says applied false", "ok applied=false", fin.Str("class")+" applied="+fin.Raw("applied"), why)
	j := h.MustShow("stale-1").Job
	h.Equal("stale-1 is still leased to H under token 2", "leased owner=H token=2 attempts=2",
		fmt.Sprintf("%s owner=%s token=%d attempts=%d", stateReason(j), harness.Repr(j.Owner), j.Token, j.Attempts),
		"the token is the fence: a stale holder's outcome changes nothing")
}

// heldAnswer is a gate for the fake receiver's Answer.Hold: the answer waits
// until release, which the step's end also calls, so no held connection
// outlives the step.
func heldAnswer(h *harness.Harness) (hold chan struct{}, release func()) {
	hold = make(chan struct{})
	released := false
	release = func() {
		if !released {
			released = true
			close(hold)
		}
	}
	h.OnCleanup(release)
	return hold, release
}
