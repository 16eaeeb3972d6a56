package labsteps

import (
	"fmt"
	"slices"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// batchCase is one job of the batch: its fake answer, and what its
// response event and its finish (if any) must say.
type batchCase struct {
	id     string
	answer harness.Answer
	status int64
	ack    string
	class  string // "" when the job is not finished
	state  string // after, as stateReason; leftLeased for leased to S under token 1
}

// batchDelivery runs `sender run-once --batch 5` over six due jobs (CONTRACT
// §4, batched delivery, opt-in): one claim grants the five due first, by
// available_at then id (the ids sort the other way round, and the sixth,
// due last, sorts first by id); each is POSTed once; the three decided
// ones are finished in one transaction, the BadAck and the 302 left leased;
// the events come as claiming, five claimed, five responses, three
// finished in claim order; the exit code is the first undecided job's in
// claim order, 20 for the BadAck before the 302's 21. An implementation
// whose sender refuses --batch as a usage error (exit 2) does not offer it
// and is not graded on it.
func batchDelivery(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-t.db")
	h.Init()
	fake := h.StartFakeReceiver()
	cases := []batchCase{
		{"z-ok", harness.Answer{Status: 200, Body: `{"ack":true}`}, 200, "true", "ok", "done"},
		{"y-503", harness.Answer{Status: 503, Body: refusal("busy")}, 503, "false", "retryable", "pending"},
		{"x-badack", harness.Answer{Status: 200, Body: `{"ack":"ok"}`}, 200, `"ok"`, "", leftLeased},
		{"w-404", harness.Answer{Status: 404, Body: refusal("unknown")}, 404, "false", "permanent", "dead(permanent)"},
		{"v-302", harness.Answer{Status: 302, Redirect: true}, 302, "null", "", leftLeased},
	}
	for i, c := range cases {
		h.MustEnqueue(c.id, 7, t0+int64(i))
		fake.On(c.id, c.answer)
	}
	h.MustEnqueue(batchLate, 7, t0+int64(len(cases)))
	fake.On(batchLate, harness.Answer{Status: 200, Body: `{"ack":true}`})
	run := h.RunSender("S", harness.SenderOpts{URL: fake.URL, Now: batchNow, LeaseMs: batchLease, Batch: fmt.Sprint(len(cases))})
	if run.Code == 2 && len(run.Lines) == 0 && len(fake.Requests()) == 0 {
		h.Narrate("· sender refuses --batch (exit 2, nothing printed or sent): this implementation does not offer batched delivery; not graded (CONTRACT §4, opt-in)")
		return
	}
	ids := []string{batchLate}
	for _, c := range cases {
		ids = append(ids, c.id)
	}
	after := h.ShowAll(ids...)

	judgeBatchClaim(h, cases, run, after)
	judgeBatchDelivered(h, fake, cases, ids, after)
	judgeBatchEvents(h, cases, run, after)
	judgeBatchFlag(h, fake)
	judgeBatchExit(h, run)
	batchCrashSwitch(h, fake)
	batchLeaseRunsOut(h, fake)
}

// The batch of part t: the clock its runs hold, their lease, and the job
// due after the five a batch of five grants.
const (
	batchNow   = t0 + 10
	batchLease = 30000
	batchLate  = "a-late"
)

// judgeBatchClaim checks the grant: the five due first, each as a claim of
// its own, and not the sixth.
func judgeBatchClaim(h *harness.Harness, cases []batchCase, run harness.SenderRun, after map[string]harness.Shown) {
	h.Clause("§4.batch.claim")
	whyClaim := "CONTRACT §4 (batched delivery): one claim grants up to N jobs, each exactly as a claim of its own: the first claimable " +
		"by available_at then id, token + 1, attempt + 1, its own lease_until = now + lease"
	var wantClaimed, gotClaimed []string
	for _, c := range cases {
		wantClaimed = append(wantClaimed, fmt.Sprintf("%s qty=7 token=1 attempt=1 lease_until=%d", c.id, batchNow+batchLease))
	}
	for _, l := range run.Lines {
		if l.Str("event") == "claimed" {
			gotClaimed = append(gotClaimed, fmt.Sprintf("%s qty=%s token=%s attempt=%s lease_until=%s", l.Str("id"), l.Raw("qty"), l.Raw("token"), l.Raw("attempt"), l.Raw("lease_until")))
		}
	}
	h.Equal("sender run-once --batch 5: the claimed events, in the order granted", strings.Join(wantClaimed, "; "), strings.Join(gotClaimed, "; "), whyClaim)
	lj := after[batchLate].Job
	h.Equal(batchLate+" (due after the five) is not granted: pending, token 0", "pending token=0",
		fmt.Sprintf("%s token=%d", stateReason(lj), lj.Token), whyClaim+"; a batch of 5 grants 5")
}

// judgeBatchDelivered checks that each granted job was POSTed once and
// decided as in run-once, the undecided ones left leased.
func judgeBatchDelivered(h *harness.Harness, fake *harness.FakeReceiver, cases []batchCase, ids []string, after map[string]harness.Shown) {
	h.Clause("§4.batch.deliver", "§4.batch.finish")
	whyDeliver := "CONTRACT §4 (batched delivery): each granted job is POSTed once and classified as in run-once; a BadAck or an " +
		"unexpected answer leaves its job leased, and the batch's other jobs are delivered and decided all the same"
	var wantPosts, gotPosts []string
	for _, c := range cases {
		wantPosts = append(wantPosts, fmt.Sprintf(`%s: POST /orders {"id":%q,"qty":7,"token":1}`, c.id, c.id))
	}
	for _, id := range ids {
		for _, r := range fake.RequestsFor(id) {
			gotPosts = append(gotPosts, id+": "+r.Method+" "+r.Path+" "+canonicalOrder(r.Body))
		}
	}
	slices.Sort(wantPosts)
	slices.Sort(gotPosts)
	h.Equal("what the receiver got: one POST per granted job, none for "+batchLate, strings.Join(wantPosts, "; "), strings.Join(gotPosts, "; "), whyDeliver)
	var wantStates, gotStates []string
	for _, c := range cases {
		want := c.state
		if want == leftLeased {
			want = "leased owner=S token=1"
		}
		j := after[c.id].Job
		got := stateReason(j)
		if j.State == "leased" {
			got = fmt.Sprintf("leased owner=%s token=%d", harness.Repr(j.Owner), j.Token)
		}
		wantStates = append(wantStates, c.id+" "+want)
		gotStates = append(gotStates, c.id+" "+got)
	}
	h.Equal("the batch's jobs after", strings.Join(wantStates, ", "), strings.Join(gotStates, ", "), whyDeliver)
}

// judgeBatchEvents checks the events: their kinds in order, the responses
// in any order, the finished in claim order.
func judgeBatchEvents(h *harness.Harness, cases []batchCase, run harness.SenderRun, after map[string]harness.Shown) {
	h.Clause("§4.batch.events")
	var wantKinds []string
	wantKinds = append(wantKinds, "claiming")
	for range cases {
		wantKinds = append(wantKinds, "claimed")
	}
	for range cases {
		wantKinds = append(wantKinds, "response")
	}
	var wantFin []string
	for _, c := range cases {
		if c.class != "" {
			wantKinds = append(wantKinds, "finished")
			wantFin = append(wantFin, fmt.Sprintf("%s token=1 %s applied=true %s", c.id, c.class, finishedState(after[c.id].Job)))
		}
	}
	whyEvents := "CONTRACT §4 (batched delivery): claiming once; a claimed for each granted job after the claim's commit; a response " +
		"for each job after its POST; then, after the finish transaction's commit, a finished for each finished job in the order of " +
		"the claimed events. Every claimed comes before the first response, every finished after the last response"
	h.Equal("sender run-once --batch 5: events, in order", strings.Join(wantKinds, " "), run.Events(), whyEvents)
	var gotFin []string
	var wantResp, gotResp []string
	for _, c := range cases {
		wantResp = append(wantResp, fmt.Sprintf("%s token=1 status=%d ack=%s", c.id, c.status, c.ack))
	}
	for _, l := range run.Lines {
		switch l.Str("event") {
		case "finished":
			gotFin = append(gotFin, fmt.Sprintf("%s token=%s %s applied=%s state=%s reason=%s", l.Str("id"), l.Raw("token"), l.Str("class"), l.Raw("applied"),
				l.Str("state"), eventReason(l)))
		case "response":
			gotResp = append(gotResp, fmt.Sprintf("%s token=%s status=%s ack=%s", l.Str("id"), l.Raw("token"), l.Raw("status"), l.Raw("ack")))
		}
	}
	slices.Sort(wantResp) // responses may come in any order: deliveries may run at once
	slices.Sort(gotResp)
	h.Equal("sender run-once --batch 5: the response events (in any order)", strings.Join(wantResp, "; "), strings.Join(gotResp, "; "),
		"CONTRACT §4 (batched delivery): each line has the members of the single-job event: status and ack as the receiver sent them")
	h.Equal("sender run-once --batch 5: the finished events, in claim order", strings.Join(wantFin, "; "), strings.Join(gotFin, "; "), whyEvents)
}

// judgeBatchFlag runs --batch 0 and 1001: each out of range, nothing
// claimed or sent although a job is due.
func judgeBatchFlag(h *harness.Harness, fake *harness.FakeReceiver) {
	h.Clause("§4.batch.flag")
	for _, n := range []string{"0", "1001"} {
		r := h.RunSender("S", harness.SenderOpts{URL: fake.URL, Now: batchNow, LeaseMs: batchLease, Batch: n})
		lj := h.MustShow(batchLate).Job
		h.Check("sender run-once --batch "+n+": exit 3, nothing claimed or sent",
			r.Code == 3 && r.Signal == "" && lj.State == "pending" && lj.Token == 0 && len(fake.RequestsFor(batchLate)) == 0,
			"exit 3; "+batchLate+" pending token=0, no request",
			fmt.Sprintf("%s; events: %s; %s %s token=%d, %d request(s)", r.Exit(), r.Events(), batchLate, stateReason(lj), lj.Token, len(fake.RequestsFor(batchLate))),
			"CONTRACT §4 (batched delivery): --batch is 1 to 1000; outside the range exit 3, with nothing claimed or sent")
	}
}

// judgeBatchExit checks the batch's exit code: the first undecided job's in
// claim order.
func judgeBatchExit(h *harness.Harness, run harness.SenderRun) {
	h.Clause("§4.batch.exit")
	h.Check("sender run-once --batch 5: exit code", run.Code == 20 && run.Signal == "", "exit 20",
		fmt.Sprintf("%s; events: %s", run.Exit(), run.Events()),
		"CONTRACT §4 (batched delivery): when a job was BadAck or unexpected, the sender exits with the code of the first such job in "+
			"claim order after the finish transaction: x-badack's 20, granted before v-302's 21")
}

// batchCrashSwitch: the crash switch, on a queue of its own: two due jobs,
// a batch of two, and the sender gone after the first response.
func batchCrashSwitch(h *harness.Harness, fake *harness.FakeReceiver) {
	h.Section("t: --batch 2 --exit-after-receipt 42")
	h.Clause("§3.init.json")
	h.UseQueue("queue-t2.db")
	h.Init()
	for i, id := range []string{"c-1", "c-2"} {
		h.MustEnqueue(id, 7, t0+int64(i))
		fake.On(id, harness.Answer{Status: 200, Body: `{"ack":true}`})
	}
	h.Clause("§4.batch.crash-switch")
	crash := h.RunSender("S", harness.SenderOpts{URL: fake.URL, Now: batchNow, LeaseMs: batchLease, Batch: "2", ExitAfterReceipt: 42})
	c1, c2 := h.MustShow("c-1").Job, h.MustShow("c-2").Job
	whyCrash := "CONTRACT §4 (batched delivery): --exit-after-receipt fires after the batch's first response: no finish runs, " +
		"and every job of the batch stays leased"
	h.Equal("sender run-once --batch 2 --exit-after-receipt 42: exit, events, requests, jobs after",
		"exit 42; claiming claimed claimed response; requests c-1=1 c-2=0; c-1 leased token=1, c-2 leased token=1",
		fmt.Sprintf("%s; %s; requests c-1=%d c-2=%d; c-1 %s token=%d, c-2 %s token=%d", harness.ExitText(crash.Code, crash.Signal), crash.Events(),
			len(fake.RequestsFor("c-1")), len(fake.RequestsFor("c-2")), stateReason(c1), c1.Token, stateReason(c2), c2.Token), whyCrash)
}

// batchLeaseRunsOut: S's batch of two is granted together under token 1
// each; the fake holds the answer to the second while the harness reclaims
// the first at S's lease_until (token 2). S's one finish transaction must
// then fence each job by its own token: b-2's finish applies, b-1's does not
// (CONTRACT §4, batched delivery: every guarantee holds per job).
func batchLeaseRunsOut(h *harness.Harness, fake *harness.FakeReceiver) {
	const now, lease = batchNow, batchLease
	h.Section("t: --batch 2, a lease runs out mid-batch")
	h.Clause("§3.init.json")
	h.UseQueue("queue-t3.db")
	h.Init()
	hold, release := heldAnswer(h)
	h.MustEnqueue("b-1", 7, t0)
	h.MustEnqueue("b-2", 7, t0+1)
	fake.On("b-1", harness.Answer{Status: 200, Body: `{"ack":true}`})
	fake.On("b-2", harness.Answer{Status: 200, Body: `{"ack":true}`, Hold: hold})
	p := h.StartSender("S", harness.SenderOpts{URL: fake.URL, Now: now, LeaseMs: lease, TimeoutMs: 600000, Batch: "2"})
	fake.WaitRequest("b-2", "S must have claimed both jobs and posted b-2 before b-1's lease can run out under it")
	h.Clause("§2.claim.expiry")
	c := h.Claim("H", now+lease, lease)
	h.Check("the harness reclaims b-1 at S's lease_until with token 2", c.Run.Code == 0 && c.Claimed && c.Job.ID == "b-1" && c.Job.Token == 2,
		"b-1 claimed with token 2", fmt.Sprintf("%s %s", c.Run.Exit(), harness.Trim(c.Run.Stdout)),
		"S's leases have run out on the injected clock, so the first due job comes back with a new token while S still waits for b-2's answer")
	h.Action("release the held answer to b-2: 200 {\"ack\":true}", result.NoClock)
	release()
	h.Clause("§4.batch.per-job", "§2.finish.fence", "§4.batch.exit")
	run := p.Finish("S's run-once ends after its batch's finish transaction")
	var fin []string
	for _, l := range run.Lines {
		if l.Str("event") == "finished" {
			fin = append(fin, fmt.Sprintf("%s token=%s applied=%s", l.Str("id"), l.Raw("token"), l.Raw("applied")))
		}
	}
	b1, b2 := h.MustShow("b-1").Job, h.MustShow("b-2").Job
	h.Equal("S's batch finish, each job fenced by its own token: exit, finished events, jobs after",
		"exit 12; b-1 token=1 applied=false, b-2 token=1 applied=true; b-1 leased owner=H token=2, b-2 done",
		fmt.Sprintf("%s; %s; b-1 %s owner=%s token=%d, b-2 %s", harness.ExitText(run.Code, run.Signal), strings.Join(fin, ", "),
			stateReason(b1), harness.Repr(b1.Owner), b1.Token, stateReason(b2)),
		"CONTRACT §4 (batched delivery): a finish is fenced by its own job's token, whatever the rest of its batch comes to: "+
			"b-1's grant moved to H (token 2), so S's outcome for it changes nothing and S exits 12 (its first job in claim "+
			"order not applied), while b-2, still leased to S under token 1, is finished")
}
