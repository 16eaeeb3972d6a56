package labsteps

import (
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

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
