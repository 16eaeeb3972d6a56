package labsteps

import (
	"fmt"
	"net/http"

	"snacklab/labsteps/harness"
)

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
