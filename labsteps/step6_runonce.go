package labsteps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
		for end := time.Now().Add(h.WaitLimit); len(fake.RequestsFor(c.id)) == 0 && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		if len(fake.RequestsFor(c.id)) == 0 && run.Code == c.code {
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

func realReceiverCases(h *harness.Harness) {
	h.Clause("§3.init.json", "§5.listening")
	h.UseQueue("queue-a.db")
	h.Init()
	rcv := h.StartReceiver("receiver-a.db")
	h.Clause("§4.class.ok", "§4.class.badack", "§4.class.retry", "§4.class.permanent", "§4.run-once.applied", "§4.events.order", "§4.events.claimed", "§4.events.response", "§4.events.finished", "§4.once", "§5.faults.loose-ack", "§5.faults.fail-next", "§5.faults.reject", "§5.faults.post")
	cases := []sendCase{
		{id: "ok-1", code: 0, status: 200, ack: "true", class: "ok", state: "done",
			why: "a 2xx whose ack is the JSON boolean true is the only success"},
		{id: "ack-1", faults: map[string]any{"loose_ack": "1"}, code: 20, status: 200, ack: "1", state: leftLeased,
			why: "1 is not true: a BadAck is not a success, and the sender must not guess; it exits 20 and leaves the job leased"},
		{id: "ack-ok", faults: map[string]any{"loose_ack": "ok"}, code: 20, status: 200, ack: `"ok"`, state: leftLeased,
			why: "\"ok\" is not true either: truthy is not strict"},
		{id: "busy-1", faults: map[string]any{"loose_ack": "", "fail_next": 1}, code: 0, status: 503, ack: "false", class: "retryable", state: "pending",
			why: "a 5xx is temporary: finish retry and let the backoff bring it back"},
		{id: "refused-1", url: h.RefusedURL(), code: 0, status: 0, ack: "null", class: "retryable", state: "pending",
			why: "a refused connection is temporary too: the receiver may be restarting"},
		{id: "reject-1", faults: map[string]any{"reject_ids": []string{"reject-1"}}, code: 0, status: 422, ack: "false", class: "permanent", state: "dead(permanent)",
			why: "a 4xx will be refused again: retrying only wastes attempts, so quarantine it at once"},
	}
	runCases(h, rcv.URL, nil, rcv, cases)
	h.Clause("§5.new", "§5.stock", "§5.count", "§4.once")
	h.Section("a: what the receiver saw")
	st := rcv.Stock()
	h.Equal("the receiver applied ok-1, ack-1 and ack-ok (stock 3×7)", int64(21), st.Stock,
		"a BadAck means the answer was wrong, not that the order was lost: the receiver did commit it, which is why the job must stay undecided rather than be retried blindly or marked done")
	h.Equal("requests counted per id", "ack-1=1 ack-ok=1 busy-1=1 ok-1=1 refused-1=0 reject-1=1",
		fmt.Sprintf("ack-1=%d ack-ok=%d busy-1=%d ok-1=%d refused-1=%d reject-1=%d", st.Requests["ack-1"], st.Requests["ack-ok"],
			st.Requests["busy-1"], st.Requests["ok-1"], st.Requests["refused-1"], st.Requests["reject-1"]),
		"each run-once sends exactly one request, and none when the connection is refused")
}

// refusal is a realistic refusal body.
func refusal(msg string) string { return `{"ack":false,"error":"` + msg + `"}` }

func twoXXCases(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-b.db")
	h.Init()
	fake := h.StartFakeReceiver()
	h.Clause("§4.class.ok", "§4.class.badack", "§4.events.order", "§4.events.claimed", "§4.events.response", "§4.events.finished", "§4.run-once.applied", "§4.url", "§4.body", "§4.once")
	ok := func(id string, status int, body string) sendCase {
		return sendCase{id: id, answer: harness.Answer{Status: status, Body: body}, code: 0, status: int64(status), ack: "true", class: "ok", state: "done",
			why: "every 2xx is a success status, not only 200: with the ack exactly true the order is delivered"}
	}
	bad := func(id string, status int, body, ack, why string) sendCase {
		return sendCase{id: id, answer: harness.Answer{Status: status, Body: body}, code: 20, status: int64(status), ack: ack, state: leftLeased,
			why: why + ": a BadAck, so exit 20 with no finish and the job left leased under its token for the next claim to bring back"}
	}
	runCases(h, fake.URL, fake, nil, []sendCase{
		ok("ok-201", 201, `{"ack":true,"duplicate":false,"stock":7}`),
		ok("ok-202", 202, `{"ack":true}`),
		ok("ok-299", 299, `{ "stock" : 7, "ack" : true }`),
		bad("str-true", 200, `{"ack":"true"}`, `"true"`, `the string "true" is not the JSON boolean true`),
		bad("ack-false", 200, `{"ack":false,"duplicate":false}`, "false", "a 2xx whose ack is false did not acknowledge the order"),
		bad("no-ack", 200, `{"duplicate":false,"stock":7}`, "null", "a 2xx with no ack did not acknowledge the order"),
		bad("upper-ack", 201, `{"ACK":true}`, "null", `the key must be exactly "ack": "ACK" is another member`),
		bad("bare-true", 200, `true`, "null", "a body that is just true is not an object with an ack"),
		bad("not-json", 200, `ack=true`, "null", "a body that is not JSON carries no ack"),
		bad("empty-204", 204, ``, "null", "a 204 has no body, so no ack"),
	})
}

func threeXXCases(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-c.db")
	h.Init()
	fake := h.StartFakeReceiver()
	h.Clause("§4.class.unexpected", "§4.class.status-first", "§4.redirect", "§4.events.order", "§4.events.claimed", "§4.events.response", "§4.url", "§4.body", "§4.once")
	moved := func(id string, status int, body, ack string) sendCase {
		return sendCase{id: id, answer: harness.Answer{Status: status, Body: body, Redirect: true}, code: 21, status: int64(status), ack: ack, state: leftLeased,
			why: "a 3xx is not in the contract's table of answers: an unexpected result, exit 21, no finish, the job left leased; a redirect is never followed, since the order would go to an address nobody configured"}
	}
	runCases(h, fake.URL, fake, nil, []sendCase{
		moved("moved-301", 301, `<a href="/moved/orders">Moved Permanently</a>`, "null"),
		moved("moved-302", 302, ``, "null"),
		moved("moved-303", 303, ``, "null"),
		moved("moved-307", 307, `{"ack":true}`, "true"),
		moved("moved-308", 308, `{"ack":false,"error":"moved"}`, "false"),
	})
	h.Clause("§4.redirect")
	h.Section("c: the redirect target")
	h.Equal("no request ever reached the redirect target "+harness.MovedPath, "none", harness.ShowRequests(fake.MovedHits()),
		"CONTRACT §4: redirects are never followed; following one sends the order where the sender was not told to send it")
}

func fourFiveXXCases(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-d.db")
	h.Init()
	fake := h.StartFakeReceiver()
	h.Clause("§4.class.permanent", "§4.class.retry", "§4.events.order", "§4.events.claimed", "§4.events.response", "§4.events.finished", "§4.run-once.applied", "§4.url", "§4.body", "§4.once", "§2.finish.retry.pending", "§2.finish.permanent")
	perm := func(id string, status int) sendCase {
		return sendCase{id: id, answer: harness.Answer{Status: status, Body: refusal(http.StatusText(status))}, code: 0, status: int64(status), ack: "false",
			class: "permanent", state: "dead(permanent)",
			why: "every 4xx is Permanent, not only 422, whatever HTTP elsewhere suggests (408 Request Timeout, 429 Too Many Requests): the receiver will refuse it again, so quarantine it at once instead of spending its attempts"}
	}
	retry := func(id string, status int) sendCase {
		return sendCase{id: id, answer: harness.Answer{Status: status, Body: refusal("try again later")}, code: 0, status: int64(status), ack: "false",
			class: "retryable", state: "pending",
			why: "every 5xx is Retryable, not only 503: finish retry, pending again at now + backoff(id, 1)"}
	}
	runCases(h, fake.URL, fake, nil, []sendCase{
		perm("c-400", 400), perm("c-404", 404), perm("c-408", 408), perm("c-409", 409), perm("c-429", 429), perm("c-451", 451),
		retry("c-500", 500), retry("c-502", 502), retry("c-504", 504), retry("c-599", 599),
	})
}

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

func runEmpty(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-f.db")
	h.Init()
	fake := h.StartFakeReceiver()
	h.Clause("§4.run.empty", "§4.events.order")
	run := h.RunSender("S", harness.SenderOpts{Mode: "run", URL: fake.URL, Now: t0})
	h.Check("sender run on an empty queue exits 0", run.Code == 0 && run.Signal == "", "exit 0; events claiming empty",
		run.Exit()+"; events: "+run.Events(), "CONTRACT §4: run repeats until nothing is claimable and then exits 0: an empty queue is the normal end, not an error")
	h.Equal("sender run on an empty queue: events", "claiming empty", run.Events(), "one claim that finds nothing, said with the empty event")
}

func runDrains(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-g.db")
	h.Init()
	fake := h.StartFakeReceiver()
	jobs := []struct {
		id    string
		a     harness.Answer
		class string
		state string
	}{
		{"run-ok", harness.Answer{Status: 201, Body: `{"ack":true}`}, "ok", "done"},
		{"run-retry", harness.Answer{Status: 500, Body: refusal("down")}, "retryable", "pending"},
		{"run-perm", harness.Answer{Status: 404, Body: refusal("gone")}, "permanent", "dead(permanent)"},
	}
	h.Clause("§4.run.decisions", "§4.run.empty", "§4.events.order", "§4.events.finished", "§2.claim.order")
	var wantEvents, wantFin, wantStates []string
	for i, j := range jobs {
		h.MustEnqueue(j.id, 7, t0+int64(i))
		fake.On(j.id, j.a)
		wantEvents = append(wantEvents, "claiming claimed response finished")
		wantFin = append(wantFin, j.id+" "+j.class)
		wantStates = append(wantStates, j.id+" "+j.state)
	}
	run := h.RunSender("S", harness.SenderOpts{Mode: "run", URL: fake.URL, Now: t0 + 10})
	why := "CONTRACT §4: run repeats run-once until nothing is claimable; ok, retry and permanent are all decisions, so it goes on to the next job, and exits 0 once the queue has nothing due"
	h.Check("sender run over three due jobs exits 0", run.Code == 0 && run.Signal == "", "exit 0",
		run.Exit()+"; events: "+run.Events(), why)
	h.Equal("sender run: events, one group per job, then empty", strings.Join(wantEvents, " ")+" claiming empty", run.Events(), why)
	var fin []string
	for _, l := range run.Lines {
		if l.Str("event") == "finished" {
			fin = append(fin, l.Str("id")+" "+l.Str("class"))
		}
	}
	h.Equal("sender run: the jobs in claim order (available_at) and their classes", strings.Join(wantFin, ", "), strings.Join(fin, ", "),
		"each job is claimed once, oldest first, and classified by its own answer")
	var states []string
	for _, j := range jobs {
		states = append(states, j.id+" "+stateReason(h.MustShow(j.id).Job))
	}
	h.Equal("sender run: the jobs after", strings.Join(wantStates, ", "), strings.Join(states, ", "),
		"the retried job backs off past the held clock, so run does not claim it again")
}

// runStops gives run a first job whose answer is a BadAck (code 20) or a 3xx
// (code 21) and a second due job, which must be left untouched.
func runStops(h *harness.Harness, part string, code int) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-" + part + ".db")
	h.Init()
	fake := h.StartFakeReceiver()
	first, second := part+"-first", part+"-second"
	what := "a BadAck (ack \"ok\")"
	fake.On(first, harness.Answer{Status: 200, Body: `{"ack":"ok"}`})
	if code == 21 {
		what = "a 302"
		fake.On(first, harness.Answer{Status: 302, Redirect: true})
	}
	fake.On(second, harness.Answer{Status: 200, Body: `{"ack":true}`})
	h.MustEnqueue(first, 7, t0)
	h.MustEnqueue(second, 7, t0+1)
	run := h.RunSender("S", harness.SenderOpts{Mode: "run", URL: fake.URL, Now: t0 + 10})
	h.Clause("§4.run.undecided", "§4.class.badack", "§4.class.unexpected")
	why := "CONTRACT §4: a job whose answer the sender cannot explain is never finished: it stays leased, so the " +
		"lease brings it back and a person can look at it, instead of a guess burying it"
	j1 := h.MustShow(first).Job
	h.Equal(fmt.Sprintf("after %s, the first job is left leased to S under token 1", what), "leased owner=S token=1",
		fmt.Sprintf("%s owner=%s token=%d", stateReason(j1), harness.Repr(j1.Owner), j1.Token), why)
	// The reference stops there and exits as run-once would; CONTRACT v1
	// ("repeat run-once until nothing is claimable") also allows going on to
	// the other jobs and exiting 0 at the end. Either is graded as right;
	// what is judged is that the first job was not decided.
	stops := fmt.Sprintf("stops: exit %d, events end with the first job's response, the second job untouched", code)
	goesOn := "goes on: exit 0, the second job delivered and done"
	j2 := h.MustShow(second).Job
	var got string
	switch {
	case run.Code == code && run.Signal == "" && run.Events() == "claiming claimed response" &&
		j2.State == "pending" && j2.Token == 0 && len(fake.RequestsFor(second)) == 0:
		got = stops
	case run.Code == 0 && run.Signal == "" && j2.State == "done" && !finishedFor(run, first):
		got = goesOn
	default:
		got = fmt.Sprintf("%s; events: %s; the second job %s, %d request(s)", run.Exit(), run.Events(), stateReason(j2), len(fake.RequestsFor(second)))
	}
	h.Check(fmt.Sprintf("sender run after %s either stops (exit %d) or goes on to the next job (exit 0)", what, code),
		got == stops || got == goesOn, stops+" — or — "+goesOn, got, why)
}

// finishedFor reports whether a sender run printed a finished event for id.
func finishedFor(run harness.SenderRun, id string) bool {
	for _, l := range run.Lines {
		if l.Str("event") == "finished" && l.Str("id") == id {
			return true
		}
	}
	return false
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

// gracefulStop sends SIGTERM to `sender run` while it waits for an answer:
// the contract has it finish the job it holds and exit 0, not die with the
// job leased. Whether it would have claimed more is not judged: the signal
// reaches it at a moment the lab cannot observe, and the queue holds nothing
// else.
func gracefulStop(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-m.db")
	h.Init()
	fake := h.StartFakeReceiver()
	hold, release := heldAnswer(h)
	const id = "term-1"
	fake.On(id, harness.Answer{Status: 200, Body: `{"ack":true}`, Hold: hold})
	h.MustEnqueue(id, 7, t0)
	p := h.StartSender("S", harness.SenderOpts{Mode: "run", URL: fake.URL, Now: t0, LeaseMs: 30000, TimeoutMs: 600000})
	fake.WaitRequest(id, "S must hold "+id+" and wait for its answer before it is asked to stop")
	h.Clause("§4.run.signal")
	p.Terminate()
	h.Action("release the held answer: 200 {\"ack\":true}", result.NoClock)
	release()
	run := p.Finish("sender run ends after the job it holds")
	why := "CONTRACT §4: `run` stops on SIGINT or SIGTERM with exit 0 after the current job; a sender that dies on the signal leaves the job leased until its lease runs out, and one that drops it unfinished throws the delivery's outcome away"
	h.Check("S exits 0 after SIGTERM", run.Code == 0 && run.Signal == "", "exit 0", run.Exit()+"; events: "+run.Events(), why)
	fin, ok := run.Event("finished")
	h.Check("S finished "+id+" before it stopped", ok && fin.Str("id") == id && fin.Raw("applied") == "true",
		`{"event":"finished","id":"`+id+`",…,"applied":true}`, run.Events()+"; "+harness.Trim(fin.Text), why)
	j := h.MustShow(id).Job
	h.Check(id+" is decided, not left leased", j.State != "leased", "done (or pending, had S finished it retry)",
		fmt.Sprintf("%s owner=%s token=%d", stateReason(j), harness.Repr(j.Owner), j.Token), why)
}

// senderBounds gives the sender each of its numeric flags one step outside
// its range (CONTRACT §4's ranges, §1 for --now-ms and the owner): invalid
// input, exit 3, nothing on stdout, nothing claimed and nothing posted,
// although a job is due.
func senderBounds(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-n.db")
	h.Init()
	fake := h.StartFakeReceiver()
	const id = "bound-1"
	fake.On(id, harness.Answer{Status: 200, Body: `{"ack":true}`})
	h.MustEnqueue(id, 7, t0)
	cases := []struct{ flag, value string }{
		{"--lease-ms", "0"}, {"--lease-ms", "86400001"},
		{"--timeout-ms", "0"}, {"--timeout-ms", "86400001"},
		{"--busy-timeout-ms", "-1"}, {"--busy-timeout-ms", "86400001"},
		{"--now-ms", "-1"}, {"--now-ms", "9007199254740992"},
		{"--exit-after-receipt", "0"}, {"--exit-after-receipt", "126"},
		{"--owner", strings.Repeat("S", 65)},
	}
	h.Clause("§4.flags", "§1.owner", "§1.now", "§1.invalid", "§6.nothing-written")
	before := h.Snapshot()
	cmds := make([][]string, len(cases))
	for i, c := range cases {
		// Every flag the case does not set keeps a valid value.
		flags := map[string]string{"--owner": "S", "--now-ms": fmt.Sprint(t0), c.flag: c.value}
		cmds[i] = []string{"sender", "run-once", "--db", h.DB, "--url", fake.URL, "--json"}
		for _, f := range []string{"--owner", "--now-ms", c.flag} {
			if v, ok := flags[f]; ok {
				cmds[i] = append(cmds[i], f, v)
				delete(flags, f)
			}
		}
	}
	runs := h.ExecAll(cmds)
	why := "CONTRACT §4, §6: each flag has its range, and a value outside it is invalid input: exit 3, one line on stderr, and nothing claimed or sent, since the job would otherwise run under a lease, a timeout or a clock nobody asked for"
	for i, c := range cases {
		what := c.flag + " " + c.value
		if c.flag == "--owner" {
			what = "a 65-byte --owner"
		}
		h.ExpectExit("`sender run-once` with "+what+" is refused", 3, runs[i], why)
		h.Check("…and prints nothing on stdout ("+what+")", runs[i].Stdout == "", "empty stdout",
			fmt.Sprintf("stdout %q", harness.Trim(runs[i].Stdout)), "a refusal is one line on stderr; stdout carries only events")
	}
	h.ExpectUnchanged(before, nil, why, "sender run-once with each flag outside its range")
	h.Equal("the receiver got nothing", 0, len(fake.RequestsFor(id)), why)

	// The other side of each bound: the extreme values are accepted. The
	// crash switch makes each run end at a known code once it has the
	// response (or none, within a 1 ms timeout), whatever the answer.
	// bound-2 is due at 0, bound-3 just before 2^53−1; the lower run goes
	// first, since the upper one's clock is past bound-2's deadline.
	for _, b := range []string{"bound-2", "bound-3"} {
		fake.On(b, harness.Answer{Status: 200, Body: `{"ack":true}`})
	}
	h.MustEnqueue("bound-2", 7, 0)
	h.MustEnqueue("bound-3", 7, 9007199254740991-1000)
	base := []string{"run-once", "--db", h.DB, "--url", fake.URL, "--json"}
	h.Clause("§4.flags", "§1.owner", "§1.now")
	low := h.Exec("sender", slices.Concat(base, []string{"--owner", "9", "--now-ms", "0",
		"--lease-ms", "1", "--timeout-ms", "1", "--busy-timeout-ms", "0", "--exit-after-receipt", "1"})...)
	high := h.Exec("sender", slices.Concat(base, []string{"--owner", strings.Repeat("S", 64), "--now-ms", "9007199254740991",
		"--lease-ms", "86400000", "--timeout-ms", "86400000", "--busy-timeout-ms", "86400000", "--exit-after-receipt", "125"})...)
	whyOK := "CONTRACT §4: the ends of each range are valid; here the crash switch then ends the run with its code"
	h.ExpectExit("`sender run-once` with every flag at its lower end (owner \"9\", now 0, lease and timeout 1 ms, busy timeout 0, --exit-after-receipt 1)", 1, low, whyOK)
	h.ExpectExit("`sender run-once` with every flag at its upper end (a 64-byte owner, now 2^53−1, lease, timeout and busy timeout one day, --exit-after-receipt 125)", 125, high, whyOK)
}

// receiverBounds starts the receiver with each flag one step outside its
// range or malformed (CONTRACT §5): invalid input, exit 3, nothing on stdout,
// and its database file never created, since every flag is checked before
// any file is touched. A receiver that starts instead announces its address:
// that line, not a wait, is the wrong answer.
func receiverBounds(h *harness.Harness) {
	h.Clause("§5.flags", "§5.start.order", "§1.invalid")
	cases := []struct{ flag, value string }{
		{"--busy-timeout-ms", "0"}, {"--busy-timeout-ms", "86400001"},
		{"--fail-next", "-1"}, {"--fail-next", "1000001"},
		{"--hold-next", "-1"}, {"--hold-next", "1000001"},
		{"--loose-ack", "yes"},
		{"--reject-id", "a b"},
		{"--addr", "127.0.0.1:65536"},
	}
	procs := make([]*harness.Proc, len(cases))
	dbs := make([]string, len(cases))
	for i, c := range cases {
		dbs[i] = filepath.Join(h.Dir, fmt.Sprintf("receiver-bound-%d.db", i))
		args := []string{"--db", dbs[i], c.flag, c.value}
		if c.flag != "--addr" {
			args = append(args, "--addr", "127.0.0.1:0")
		}
		procs[i] = h.Start(fmt.Sprintf("receiver-bound-%d", i), result.LaneReceiver, "receiver", result.NoClock, harness.DescribeRequest, args...)
	}
	why := "CONTRACT §5, §6: every flag of the receiver has its range or form, checked before any file is touched: a value outside it is invalid input (exit 3), and a refused start creates nothing"
	for i, c := range cases {
		what := c.flag + " " + c.value
		p := procs[i]
		switch p.WaitLines(func(lines []harness.Line) bool { return len(lines) > 0 }) {
		case harness.CondHeld:
			first := p.Lines()[0].Text
			p.Kill()
			h.Check("`receiver` with "+what+" is refused", false, "exit 3, before it listens",
				fmt.Sprintf("it started and printed %q", harness.Trim(first)), why)
			continue
		case harness.LimitHit, harness.StepEnded:
			h.Timeout("`receiver` with "+what+" ends or prints", "exit 3", p.Observed(), why)
			continue
		}
		code, sig := p.Wait("a refused receiver ends by itself")
		h.Check("`receiver` with "+what+" is refused: exit 3", code == 3 && sig == "", "exit 3",
			harness.ExitText(code, sig)+p.StderrHint(), why)
		h.Check("…and prints nothing on stdout ("+what+")", len(p.Lines()) == 0, "empty stdout",
			fmt.Sprintf("%d line(s) on stdout", len(p.Lines())), "the first line a started receiver prints is its address; a refused one has none")
		_, err := os.Stat(dbs[i])
		h.Equal("…and creates no database file ("+what+")", "absent", harness.Presence(err), why)
	}
	// The other side: the ends of each range start a receiver (StartReceiver
	// fails the step unless it announces its address).
	h.Clause("§5.flags", "§5.listening")
	h.StartReceiver("receiver-upper.db", "--busy-timeout-ms", "86400000", "--fail-next", "1000000", "--hold-next", "1000000")
	h.StartReceiver("receiver-lower.db", "--busy-timeout-ms", "1", "--fail-next", "0", "--hold-next", "0", "--loose-ack", "ok")
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

// receiverClauses judges CONTRACT §5 directly over HTTP.
func receiverClauses(h *harness.Harness) {
	h.Clause("§5.listening")
	rcv := h.StartReceiver("receiver-k.db")
	post := func(body string) harness.HTTPAnswer { return h.HTTP(http.MethodPost, rcv.URL+"/orders", body) }

	h.Clause("§5.concurrent", "§5.new", "§5.dup", "§5.log", "§5.stock", "§5.count")
	h.Section("k: 20 simultaneous POSTs of one new id")
	const n = 20
	// The harness holds the receiver's file lock while the copies arrive, so
	// each waits at its first use of the file: a check made outside the
	// transaction that inserts then meets the other copies' checks.
	sent := time.Now()
	answers := h.PostTogether(rcv.URL, "/orders", `{"id":"k-same","qty":7,"token":1}`, n, rcv.DB)
	answered := time.Now()
	// A copy the lab held unfinished for a second or more may have been cut
	// by a time bound the contract allows, and then failed or been refused
	// (a receiver that stops waiting for a body may answer 400): the machine
	// was too slow for the probe, which is no wrong answer.
	for i, a := range answers {
		served := a.Err == nil && (a.Status == 200 && a.Ack() == "true" || a.Status >= 500 && a.Status <= 599)
		if !served && a.Held >= time.Second {
			h.Timeout(fmt.Sprintf("%d simultaneous POSTs: the lab sends each copy's last byte within a second of its first", n),
				"every copy finished within the 1s a receiver may bound a client to",
				fmt.Sprintf("copy #%d was held %v before its last byte, then %s", i, a.Held.Round(time.Millisecond), a),
				"CONTRACT §5 lets a receiver cut a client that stalls a second or more; on a machine this slow the probe cannot tell a cut from a lost copy")
		}
	}
	// A copy answered 5xx (say, a receiver that gave up on the busy file)
	// is tolerated: the sender retries it and the retry is a duplicate. What
	// is judged is that exactly one copy applied.
	var fresh, dup, busy, other []string
	for i, a := range answers {
		switch {
		case a.Err == nil && a.Status == 200 && a.Ack() == "true" && a.Member("duplicate") == "false":
			fresh = append(fresh, fmt.Sprint(i))
		case a.Err == nil && a.Status == 200 && a.Ack() == "true" && a.Member("duplicate") == "true":
			dup = append(dup, fmt.Sprint(i))
		case a.Err == nil && a.Status >= 500 && a.Status <= 599 && a.Ack() != "true":
			busy = append(busy, fmt.Sprint(i))
		default:
			other = append(other, fmt.Sprintf("#%d: %s", i, a))
		}
	}
	whyOnce := "CONTRACT §5: the id and its stock effect are recorded in one transaction, so however many copies arrive at once exactly one applies and the rest are duplicates; a receiver that checks and then inserts in two steps lets several copies see the id as new"
	otherText := "none other"
	if len(other) > 0 {
		otherText = strings.Join(other, "; ")
	}
	h.Equal(fmt.Sprintf("%d simultaneous POSTs: every answer is 200 with ack true (or a 5xx the sender would retry)", n), "none other", otherText, whyOnce)
	h.Equal(fmt.Sprintf("%d simultaneous POSTs: answers with duplicate false, with duplicate true or 5xx", n), fmt.Sprintf("1, %d", n-1),
		fmt.Sprintf("%d, %d", len(fresh), len(dup)+len(busy)), whyOnce)
	logged := func(lines []harness.Line, result string) int {
		k := 0
		for _, l := range lines {
			if l.Str("event") == "request" && l.Str("id") == "k-same" && (result == "" || l.Str("result") == result) {
				k++
			}
		}
		return k
	}
	if rcv.WaitLines(func(lines []harness.Line) bool { return logged(lines, "") >= n }) != harness.CondHeld {
		h.Check(fmt.Sprintf("the receiver logs %d requests for k-same", n), false, fmt.Sprintf("%d request lines", n),
			fmt.Sprintf("%d request lines", logged(rcv.Lines(), "")), "CONTRACT §5: one JSON line per request")
	}
	applied := logged(rcv.Lines(), "applied")
	st := rcv.Stock()
	h.Equal(fmt.Sprintf("%d simultaneous POSTs: stock, orders, requests, applied log lines", n), fmt.Sprintf("stock=7 orders=1 requests=%d applied=1", n),
		fmt.Sprintf("stock=%d orders=%d requests=%d applied=%d", st.Stock, st.Orders, st.Requests["k-same"], applied), whyOnce)
	// The receiver has no clock flag: its at_ms is the wall clock's, in ms,
	// between the lab's first byte and its last answer (a second's slack
	// either side for clocks read at other instants).
	h.Clause("§5.log")
	var offClock []string
	for _, l := range rcv.Lines() {
		if at := l.Int("at_ms"); l.Str("event") == "request" && l.Str("id") == "k-same" &&
			(at < sent.UnixMilli()-1000 || at > answered.UnixMilli()+1000) {
			offClock = append(offClock, fmt.Sprint(at))
		}
	}
	window := fmt.Sprintf("every one within %d … %d", sent.UnixMilli()-1000, answered.UnixMilli()+1000)
	gotClock := window
	if len(offClock) > 0 {
		gotClock = "outside it: " + strings.Join(offClock, ", ")
	}
	h.Equal(fmt.Sprintf("the %d request lines' at_ms: the wall clock in ms when each arrived", n), window, gotClock,
		"CONTRACT §5: each request line says when the request arrived, in milliseconds since the epoch, as every other time of the contract")
	// Every answer with ack true carries the stock after it: 7, the one
	// order's qty, whether it applied the order or found it a duplicate.
	h.Clause("§5.dup", "§5.new")
	var badStock []string
	for i, a := range answers {
		if a.Err == nil && a.Status == 200 && a.Member("stock") != "7" {
			badStock = append(badStock, fmt.Sprintf("#%d: %s", i, a))
		}
	}
	h.Equal(fmt.Sprintf("%d simultaneous POSTs: 200 answers without the stock 7", n), "none", orNone(badStock),
		"CONTRACT §5: a new order's answer and a duplicate's both carry the stock S as it stands after the order: the client learns what the shop holds")

	h.Clause("§5.conflict", "§5.body", "§5.refusal-body", "§5.faults.fail-next", "§5.faults.reject", "§5.faults.post")
	h.Section("k: another qty, malformed bodies, faults")
	type probe struct {
		what, body string
		faults     map[string]any
		status     int
		why        string
	}
	probes := []probe{
		{"the same id with another qty", `{"id":"k-same","qty":8,"token":2}`, nil, 409,
			"CONTRACT §5: same id, other qty is a conflict (409): nothing is added and the first qty stands"},
		{"a body that is not JSON", `id=k-nojson&qty=7`, nil, 400, "CONTRACT §5: a malformed body is 400"},
		{"an unknown field", `{"id":"k-extra","qty":7,"token":1,"note":"x"}`, nil, 400,
			"CONTRACT §5: unknown fields are malformed (400), so a sender's typo shows up instead of being ignored"},
		{"qty 0", `{"id":"k-qty0","qty":0,"token":1}`, nil, 400, "CONTRACT §1: qty is 1 to 1000000"},
		{"a token that is a string", `{"id":"k-tok","qty":7,"token":"1"}`, nil, 400, "CONTRACT §5: the token is an integer"},
		{"an invalid id", `{"id":"k bad id","qty":7,"token":1}`, nil, 400, "CONTRACT §1: the id's pattern has no spaces"},
		{"fail_next 1", `{"id":"k-503","qty":7,"token":1}`, map[string]any{"fail_next": 1}, 503,
			"CONTRACT §5: fail_next answers 503 before touching the order"},
		{"reject_ids", `{"id":"k-422","qty":7,"token":1}`, map[string]any{"reject_ids": []string{"k-422"}}, 422,
			"CONTRACT §5: reject_ids answers 422"},
	}
	for _, p := range probes {
		if p.faults != nil {
			rcv.SetFaults(p.faults)
		}
		a := post(p.body)
		h.Check(fmt.Sprintf("POST /orders with %s: status and ack", p.what), a.Err == nil && a.Status == p.status && a.Ack() == "false",
			fmt.Sprintf(`%d {"ack":false,"error":"…"}`, p.status), a.String(), p.why+`; every refusal's body is {"ack":false,"error":"…"}`)
	}
	h.Clause("§5.count", "§5.stock", "§5.conflict")
	st2 := rcv.Stock()
	got := fmt.Sprintf("stock=%d orders=%d", st2.Stock, st2.Orders)
	for _, id := range []string{"k-same", "k-extra", "k-qty0", "k-tok", "k-503", "k-422"} {
		got += fmt.Sprintf(" %s=%d", id, st2.Requests[id])
	}
	h.Equal("every request with a parseable id is counted, whatever the answer; nothing refused is added",
		fmt.Sprintf("stock=7 orders=1 k-same=%d k-extra=1 k-qty0=1 k-tok=1 k-503=1 k-422=1", n+1), got,
		"CONTRACT §5: every POST /orders with a parseable id counts as one request for that id, whatever the answer (409, 400, 503, 422): the count is the evidence of what arrived")
	h.Clause("§5.order", "§5.count", "§5.conflict")
	o := h.HTTP(http.MethodGet, rcv.URL+"/orders/k-same", "")
	h.Equal("GET /orders/k-same after the conflict", fmt.Sprintf(`200 qty=7 requests=%d`, n+1),
		fmt.Sprintf("%d qty=%s requests=%s", o.Status, o.Member("qty"), o.Member("requests")),
		"a conflict changes nothing: the first qty stands")
	h.Clause("§5.order")
	for _, id := range []string{"k-unknown", "k-extra"} {
		a := h.HTTP(http.MethodGet, rcv.URL+"/orders/"+id, "")
		h.Equal("GET /orders/"+id+" (never applied) is 404", 404, a.Status,
			"CONTRACT §5: an order that was never applied is not found; a refused request is counted but is not an order")
	}
	headerLimit(h, rcv)
}
