package labsteps

import (
	"fmt"
)

var step6 = Step{
	Num: 6, Slug: "run-once",
	Title: "Run-once against the real receiver: only a strict true is ok; BadAck stays leased; 5xx/refused retry; 4xx permanent",
	Checks: "`sender run-once` posts to a real receiver switched into each fault mode in turn. `{\"ack\":true}` " +
		"finishes ok (done). `\"ack\":1` and `\"ack\":\"ok\"` are BadAck: exit 20, no finish, the job stays " +
		"leased under its token. A 503 and a refused connection finish retry (pending at now+backoff). A 422 " +
		"finishes permanent (dead). The events come in the contract's order, each before the next action.",
	Why: "A sender that counts 1 or \"ok\" as success marks undelivered orders done, and nobody ever finds " +
		"out; one that guesses on an answer it cannot explain buries the evidence. Leaving the job leased lets " +
		"the lease run out and the next claim bring it back.",
	run: runStep6,
}

func runStep6(h *Harness) {
	h.Init()
	rcv := h.StartReceiver("receiver.db")
	refused := h.RefusedURL()
	type tc struct {
		id     string
		faults map[string]any
		url    string
		code   int
		status int64
		ack    string // the response event's ack, as sent (CONTRACT §4)
		class  string // the finished event's class; "" when there is no finish
		state  string // after, as stateReason; "" for leased to S under token 1
		why    string
	}
	cases := []tc{
		{"ok-1", nil, "", 0, 200, "true", "ok", "done",
			"a 2xx whose ack is the JSON boolean true is the only success"},
		{"ack-1", map[string]any{"loose_ack": "1"}, "", 20, 200, "1", "", "",
			"1 is not true: a BadAck is not a success, and the sender must not guess; it exits 20 and leaves the job leased"},
		{"ack-ok", map[string]any{"loose_ack": "ok"}, "", 20, 200, `"ok"`, "", "",
			"\"ok\" is not true either: truthy is not strict"},
		{"busy-1", map[string]any{"loose_ack": "", "fail_next": 1}, "", 0, 503, "false", "retryable", "pending",
			"a 5xx is temporary: finish retry and let the backoff bring it back"},
		{"refused-1", nil, refused, 0, 0, "null", "retryable", "pending",
			"a refused connection is temporary too: the receiver may be restarting"},
		{"reject-1", map[string]any{"reject_ids": []string{"reject-1"}}, "", 0, 422, "false", "permanent", "dead(permanent)",
			"a 4xx will be refused again: retrying only wastes attempts, so quarantine it at once"},
	}
	for i, c := range cases {
		h.MustEnqueue(c.id, 7, t0+int64(i)*10)
	}
	for i, c := range cases {
		now := t0 + int64(i)*10
		h.Section(c.id)
		if c.faults != nil {
			rcv.SetFaults(c.faults)
		}
		url := rcv.URL
		if c.url != "" {
			url = c.url
		}
		run := h.RunSender("S", SenderOpts{URL: url, Now: now, LeaseMs: 30000})
		what := fmt.Sprintf("%s: sender run-once", c.id)
		claimed, ok := run.Event("claimed")
		h.Check(what+" claims the job", ok && claimed.Str("id") == c.id, c.id+" claimed with token 1",
			fmt.Sprintf("%s; %s", run.Events(), run.Exit()), "this job is the only one due at this instant")
		resp, ok := run.Event("response")
		h.Check(what+" reports the response: status and ack as sent", ok && resp.Int("status") == c.status && resp.Raw("ack") == c.ack,
			fmt.Sprintf(`{"event":"response",…,"status":%d,"ack":%s}`, c.status, c.ack), fmt.Sprintf("%s; %s", run.Events(), trim(resp.Text)),
			"the response event shows what came back, before the sender acts on it: the evidence of what the receiver said")
		h.Check(what+" exit code", run.Code == c.code && run.Signal == "", fmt.Sprintf("exit %d", c.code),
			fmt.Sprintf("%s, after ack %s and events: %s", run.Exit(), resp.Raw("ack"), run.Events()), c.why)
		wantEvents := "claiming claimed response finished"
		if c.state == "" {
			wantEvents = "claiming claimed response"
		}
		h.Equal(what+" events, in order", wantEvents, run.Events(),
			"events come in the contract's order, and a BadAck has no finish: the job is left undecided")
		if fin, ok := run.Event("finished"); ok {
			h.Equal(what+" finishes with class", c.class+" applied=true", fmt.Sprintf("%s applied=%s", fin.Str("class"), fin.Raw("applied")),
				"the class names the classification (ok, retryable, permanent) that chose the outcome")
		}
		j := h.MustShow(c.id).Job
		switch c.state {
		case "":
			h.Equal(c.id+": the job is still leased to S under token 1", "leased owner=S token=1",
				fmt.Sprintf("%s owner=%s token=%d", j.State, show(j.Owner), j.Token), c.why)
		case "pending":
			h.Equal(c.id+": pending at now + backoff(id, 1)", fmt.Sprintf("pending available_at=%d", now+expectedBackoff(c.id, 1)),
				fmt.Sprintf("%s available_at=%d", stateReason(j), j.AvailableAt), c.why)
		default:
			h.Equal(c.id+": state", c.state, stateReason(j), c.why)
		}
	}
	h.Section("receiver")
	st := rcv.Stock()
	h.Equal("the receiver applied ok-1, ack-1 and ack-ok (stock 3×7)", int64(21), st.Stock,
		"a BadAck means the answer was wrong, not that the order was lost: the receiver did commit it, which is why the job must stay undecided rather than be retried blindly or marked done")
	h.Equal("requests counted per id", "ack-1=1 ack-ok=1 busy-1=1 ok-1=1 refused-1=0 reject-1=1",
		fmt.Sprintf("ack-1=%d ack-ok=%d busy-1=%d ok-1=%d refused-1=%d reject-1=%d", st.Requests["ack-1"], st.Requests["ack-ok"],
			st.Requests["busy-1"], st.Requests["ok-1"], st.Requests["refused-1"], st.Requests["reject-1"]),
		"each run-once sends exactly one request, and none when the connection is refused")
}
