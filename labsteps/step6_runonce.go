package labsteps

import (
	"encoding/json"
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step6 = Step{
	Step: result.Step{
		Num: 6, Slug: "run-once",
		Title: "Run-once: every row of the classification table; run drains the queue and leaves what it cannot decide; the receiver's own clauses",
		Checks: "`sender run-once` posts {id, qty, token} to URL/orders (the job's qty and this claim's token, also " +
			"after a redrive, when the token is no longer the attempt), against the real receiver in each fault mode and " +
			"against the lab's own fake receiver answering every row of CONTRACT §4's table, one job each. A 2xx with " +
			"`\"ack\":true` (200, 201, 202, 299) finishes ok (done). Any other ack on a 2xx (1, \"ok\", \"true\", false, " +
			"missing, a non-JSON or empty body) is BadAck: exit 20, no finish, the job stays leased under its token. A 3xx " +
			"is exit 21 with the job leased, and the redirect is never followed. A 4xx finishes permanent (dead); a 5xx, a " +
			"timeout, a reset and a refused connection finish retry (pending at now+backoff); an answer 5.5 s late, inside --timeout-ms, is awaited and counts. The crash switch fires after " +
			"a status-0 response too. The finished event gives the job's state and reason after the finish. `sender run` exits 0 on an empty queue and after draining it, and never decides a BadAck " +
			"or a 3xx (it stops with 20 or 21, or goes on and exits 0); a finish that is not applied is exit 12; SIGTERM while " +
			"`run` waits for an answer ends it with exit 0 once that job is finished; each sender flag one step outside its " +
			"range is exit 3 with nothing claimed or sent, and so is each receiver flag, with no file created. The receiver " +
			"applies an id once under 20 " +
			"simultaneous POSTs (every 200 carrying the stock, every request line's at_ms the wall clock), answers another qty 409 and malformed bodies 400, counts every request with a parseable " +
			"id whatever the answer, answers an unknown order 404, and answers request headers over 16 KiB 431 without " +
			"processing the order. " +
			"Its fault modes each do exactly what §5 says (fail_next N, reject_ids, loose_ack on every success, hold_next " +
			"committing first, POST /faults leaving absent fields, SIGTERM dropping a held answer); a taken port or a missing " +
			"directory stops it before any file is made. The sender keeps --url's path and holds --now-ms for a whole run. " +
			"A client that stalls 0.7 s (under the 1 s a receiver may bound it to) mid-headers, mid-body or between two requests on one connection is still served. " +
			"Where the sender offers --batch (optional), run-once --batch 5 over six due jobs grants the five due first, each " +
			"with its own token and lease, POSTs each once, finishes the decided ones, leaves a BadAck and a 302 leased, prints " +
			"every claimed before the first response and the finished in claim order, and exits 20 for the BadAck granted " +
			"before the 302; --batch 0 and 1001 are exit 3 with nothing claimed or sent; with --exit-after-receipt, --batch 2 " +
			"exits after the first response, the second job neither sent nor finished.",
		Why: "A sender that counts 1 or \"ok\" as success marks undelivered orders done, and nobody ever finds " +
			"out; one that guesses on an answer it cannot explain buries the evidence, and one that follows a redirect " +
			"delivers to an address nobody chose. Leaving the job leased lets the lease run out and the next claim bring " +
			"it back. A receiver that checks and then inserts in two steps applies a resend twice under load.",
	},
	run: runStep6,
}

// The parts are independent (each its own queue file and receiver) and run
// at once; the report shows them one after the other.
func runStep6(h *harness.Harness) {
	h.Parallel(
		harness.Part{Name: "a: the real receiver in each fault mode", Run: realReceiverCases},
		harness.Part{Name: "b: other 2xx answers and the ack", Run: twoXXCases},
		harness.Part{Name: "c: redirects are never followed", Run: threeXXCases},
		harness.Part{Name: "d: other 4xx and 5xx", Run: fourFiveXXCases},
		harness.Part{Name: "e: no answer: timeout, reset, refused; the crash switch", Run: transportCases},
		harness.Part{Name: "f: sender run on an empty queue", Run: runEmpty},
		harness.Part{Name: "g: sender run drains the queue", Run: runDrains},
		harness.Part{Name: "h: sender run leaves a BadAck undecided", Run: func(h *harness.Harness) { runStops(h, "h", 20) }},
		harness.Part{Name: "i: sender run leaves a 3xx undecided", Run: func(h *harness.Harness) { runStops(h, "i", 21) }},
		harness.Part{Name: "j: a finish that is not applied", Run: staleFinish},
		harness.Part{Name: "k: the receiver's own clauses", Run: receiverClauses},
		harness.Part{Name: "l: the order carries this claim's qty and token", Run: claimInBody},
		harness.Part{Name: "m: SIGTERM stops sender run after the current job", Run: gracefulStop},
		harness.Part{Name: "n: the sender's flags at their bounds", Run: senderBounds},
		harness.Part{Name: "o: the receiver's flags at their bounds", Run: receiverBounds},
		harness.Part{Name: "p: the receiver's fault modes, each exactly", Run: faultModes},
		harness.Part{Name: "q: the receiver binds its address before it touches a file", Run: bindFirst},
		harness.Part{Name: "r: --url is a base address: its path is kept", Run: baseURL},
		harness.Part{Name: "s: --now-ms holds the clock for the whole run", Run: heldClock},
		harness.Part{Name: "t: --batch N delivers a batch (optional)", Run: batchDelivery},
		harness.Part{Name: "u: a client that stalls a second is still served", Run: slowClient},
		harness.Part{Name: "v: an answer 5.5 s late, inside --timeout-ms", Run: lateCase},
	)
}

// sendCase is one job, one run-once, and what the contract says becomes of it.
type sendCase struct {
	id        string
	answer    harness.Answer // the fake receiver's answer (parts b–e)
	faults    map[string]any // the real receiver's fault modes (part a)
	url       string         // overrides the part's receiver URL
	timeoutMs int64          // the sender's --timeout-ms; 0: the harness's patience
	crash     int            // --exit-after-receipt; 0: off
	code      int            // expected exit code
	status    int64          // the response event's status
	ack       string         // the response event's ack, as sent (CONTRACT §4)
	class     string         // the finished event's class; "" when there is no finish
	state     string         // after, as stateReason; "" for leased to S under token 1
	why       string
}

// leftLeased is the state of a case with no finish.
const leftLeased = ""

// runCases enqueues every case's job at its own instant (10 ms apart, far
// less than the smallest backoff, so a retried job never comes back within
// the part) and runs one sender per job, in order, each at its job's instant:
// earlier jobs are then finished, backing off or still leased, so each sender
// claims exactly its own job.
func runCases(h *harness.Harness, url string, fake *harness.FakeReceiver, rcv *harness.Receiver, cases []sendCase) {
	for i, c := range cases {
		h.MustEnqueue(c.id, 7, t0+int64(i)*10)
		if fake != nil {
			fake.On(c.id, c.answer)
		}
	}
	runs := make([]harness.SenderRun, len(cases))
	ids := make([]string, len(cases))
	for i, c := range cases {
		h.Section(c.id)
		if c.faults != nil {
			rcv.SetFaults(c.faults)
		}
		u := url
		if c.url != "" {
			u = c.url
		}
		runs[i] = h.RunSender("S", harness.SenderOpts{URL: u, Now: t0 + int64(i)*10, LeaseMs: 30000, TimeoutMs: c.timeoutMs, ExitAfterReceipt: c.crash})
		ids[i] = c.id
	}
	// The jobs are read back all at once, and judged in order: the first
	// case that went wrong is the one reported.
	after := h.ShowAll(ids...)
	for i, c := range cases {
		h.Section(c.id)
		judgeCase(h, c, t0+int64(i)*10, runs[i], after[c.id].Job)
		if fake != nil && c.url == "" {
			judgePost(h, fake, c, runs[i])
		}
	}
}

// judgeCase checks one run-once against its case: the claim, the response
// event, the exit code, the events in order, the finish and the job after.
func judgeCase(h *harness.Harness, c sendCase, now int64, run harness.SenderRun, j harness.Job) {
	what := fmt.Sprintf("%s: sender run-once", c.id)
	claimed, ok := run.Event("claimed")
	h.Check(what+" claims the job", ok && claimed.Str("id") == c.id && claimed.Int("token") == 1, c.id+" claimed with token 1",
		fmt.Sprintf("%s; %s; %s", run.Events(), harness.Trim(claimed.Text), run.Exit()), "this job is the only one due at this instant")
	resp, ok := run.Event("response")
	h.Check(what+" reports the response: status and ack as sent", ok && resp.Int("status") == c.status && resp.Raw("ack") == c.ack,
		fmt.Sprintf(`{"event":"response",…,"status":%d,"ack":%s}`, c.status, c.ack), fmt.Sprintf("%s; %s", run.Events(), harness.Trim(resp.Text)),
		"the response event shows what came back (status 0 and ack null when no HTTP answer came), before the sender acts on it: the evidence of what the receiver said")
	h.Check(what+" exit code", run.Code == c.code && run.Signal == "", fmt.Sprintf("exit %d", c.code),
		fmt.Sprintf("%s, after status %d ack %s and events: %s", run.Exit(), resp.Int("status"), resp.Raw("ack"), run.Events()), c.why)
	wantEvents := "claiming claimed response finished"
	if c.class == "" {
		wantEvents = "claiming claimed response"
	}
	h.Equal(what+" events, in order", wantEvents, run.Events(),
		"events come in the contract's order; BadAck, an unexpected answer and the crash switch have no finish: the job is left undecided")
	if fin, ok := run.Event("finished"); ok {
		h.Equal(what+" finishes with class", c.class+" applied=true", fmt.Sprintf("%s applied=%s", fin.Str("class"), fin.Raw("applied")),
			"the class names the classification (ok, retryable, permanent) that chose the outcome")
		h.Equal(what+": the finished event's state and reason are the job's after the finish",
			finishedState(j), fmt.Sprintf("state=%s reason=%s", fin.Str("state"), eventReason(fin)),
			"CONTRACT §4: finished says where the finish left the job (done, pending for a retry, dead and why), not where the claim had it")
	}
	switch c.state {
	case leftLeased:
		h.Equal(c.id+": the job is still leased to S under token 1", "leased owner=S token=1",
			fmt.Sprintf("%s owner=%s token=%d", stateReason(j), harness.Repr(j.Owner), j.Token), c.why)
	case "pending":
		h.Equal(c.id+": pending at now + backoff(id, 1)", fmt.Sprintf("pending available_at=%d", now+expectedBackoff(c.id, 1)),
			fmt.Sprintf("%s available_at=%d", stateReason(j), j.AvailableAt), c.why)
	default:
		h.Equal(c.id+": state", c.state, stateReason(j), c.why)
	}
}

// finishedState is what a finished event must say of j, the job after
// the finish: "state=S reason=R", R null when not dead.
func finishedState(j harness.Job) string {
	return fmt.Sprintf("state=%s reason=%s", j.State, harness.Repr(j.Reason))
}

// eventReason is an event's reason as finishedState shows one: null,
// absent, or the string bare.
func eventReason(l harness.Line) string {
	if r := l.Raw("reason"); !strings.HasPrefix(r, `"`) {
		return r
	}
	return l.Str("reason")
}

// judgePost checks what the fake receiver got for a case: POSTs to
// URL/orders whose body is {id, qty, token} with the claimed token; exactly
// one when an HTTP answer came back.
func judgePost(h *harness.Harness, fake *harness.FakeReceiver, c sendCase, run harness.SenderRun) {
	why := "CONTRACT §4: --url is the receiver's base address and the order goes to URL/orders as {\"id\",\"qty\",\"token\"} with the claim's token, which the receiver records to show which grant landed"
	switch {
	case c.answer.Reset:
		fake.WaitRequest(c.id, why) // the fake resets only once it has read the request
	case c.answer.Hang:
		// A sender that gave up (a short --timeout-ms) may be gone before
		// the fake has read its request off the socket: wait for it. On a
		// machine so slow that the sender's timeout ran out before its
		// request left, nothing shows what it would have sent.
		if !fake.Arrives(c.id) && run.Code == c.code {
			h.Timeout(c.id+": the sender posted the order", "a POST /orders carrying id "+c.id,
				fmt.Sprintf("none within %s, and the sender reported its timeout: its --timeout-ms of %d ms may have run out before the request left", h.WaitLimit, c.timeoutMs),
				why)
		}
	}
	reqs := fake.RequestsFor(c.id)
	if !c.answer.Hang && !c.answer.Reset {
		h.Equal(c.id+": the sender sent exactly one request", 1, len(reqs),
			"one run-once delivers one job once; it does not resend on its own (the lease and the next claim do that)")
	}
	h.Check(c.id+": the sender posted the order", len(reqs) > 0, "a POST /orders carrying id "+c.id,
		"requests the fake receiver got: "+harness.ShowRequests(fake.Requests()), why)
	want := fmt.Sprintf(`POST /orders {"id":%q,"qty":7,"token":1}`, c.id)
	for _, r := range reqs {
		h.Equal(c.id+": method, path and body of the POST", want, r.Method+" "+r.Path+" "+canonicalOrder(r.Body), why)
	}
}

// canonicalOrder prints an order body as {"id","qty","token"} when it is a
// JSON object with exactly those members, and as it came otherwise.
func canonicalOrder(body string) string {
	var m map[string]json.RawMessage
	if harness.DecodeObject(body, &m) != nil || len(m) != 3 || m["id"] == nil || m["qty"] == nil || m["token"] == nil {
		return harness.Trim(body)
	}
	return fmt.Sprintf(`{"id":%s,"qty":%s,"token":%s}`, m["id"], m["qty"], m["token"])
}

// claimInBody: the order's body carries the job's own qty and the token of
// this claim. Everywhere else in the step both are 7 and 1, which a sender
// that sent a constant, or the attempt number for the token, would also
// send; after a redrive the token (2) is no longer the attempt (1).
func claimInBody(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.claim.json", "§3.finish.json", "§3.redrive.json")
	h.UseQueue("queue-l.db")
	h.Init()
	fake := h.StartFakeReceiver()
	const id = "redriven-1"
	fake.On(id, harness.Answer{Status: 201, Body: `{"ack":true}`})
	h.MustEnqueue(id, 3, t0)
	c := h.Claim("H", t0, 30000)
	h.ExpectExit("the harness claims "+id, 0, c.Run, id+" is the only job, and due")
	h.MustFinish(id, c.Job.Token, "permanent", t0+1)
	d := h.Redrive(id, "T-1", t0+2)
	h.ExpectExit("the harness redrives "+id, 0, d.Run, id+" is dead (permanent) and the note is a ticket id")
	h.Clause("§4.body", "§4.events.claimed", "§4.flags.defaults", "§4.once", "§4.run-once.applied", "§2.redrive.token")
	run := h.RunSender("S", harness.SenderOpts{URL: fake.URL, Now: t0 + 3}) // --lease-ms left to its default, 30000
	why := "CONTRACT §4: the order goes as {\"id\",\"qty\",\"token\"}: the job's qty and the token of this claim, which the receiver records to show which grant landed; " +
		"after a redrive the token goes on from where it was (2) while the attempts start again (1)"
	claimed, _ := run.Event("claimed")
	h.Equal("S's claimed event: the job's id and qty, token 2, attempt 1, lease_until = now + the default lease (30000 ms)",
		fmt.Sprintf("id=%s qty=3 token=2 attempt=1 lease_until=%d", id, t0+3+30000),
		fmt.Sprintf("id=%s qty=%d token=%d attempt=%d lease_until=%d", claimed.Str("id"), claimed.Int("qty"),
			claimed.Int("token"), claimed.Int("attempt"), claimed.Int("lease_until")),
		"CONTRACT §4: the claimed event reports this claim (id, qty, token, attempt, lease_until) before the sender posts: the record of what it holds and until when")
	reqs := fake.RequestsFor(id)
	h.Equal("S posted the order once", 1, len(reqs), "one run-once delivers one job once")
	for _, r := range reqs {
		h.Equal("the body of the POST", fmt.Sprintf(`{"id":%q,"qty":3,"token":2}`, id), canonicalOrder(r.Body), why)
	}
	h.Check("S's run-once finishes the job: exit 0", run.Code == 0 && run.Signal == "", "exit 0",
		run.Exit()+"; events: "+run.Events(), "201 with ack true is ok, and the finish with token 2 applies")
	j := h.MustShow(id).Job
	h.Equal(id+" is done under token 2", "done token=2", fmt.Sprintf("%s token=%d", stateReason(j), j.Token), why)
}
