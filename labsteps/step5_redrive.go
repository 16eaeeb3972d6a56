package labsteps

import (
	"fmt"
	"strings"
)

var step5 = Step{
	Num: 5, Slug: "redrive",
	Title: "Redrive: refused unless dead, notes are ticket ids, audit row with the change, token never rolls back",
	Checks: "Redrive is refused for a pending (exit 9), leased (10), done (11) and unknown (8) job, and for notes " +
		"that are free text, non-ASCII, control characters, too long (65 bytes; 64 is accepted) or not starting " +
		"with a letter or digit (exit 3), each time with nothing written. A redrive whose state change fails (the lab makes every update of " +
		"the job fail for a moment) leaves no audit row: the row and the change are one transaction. " +
		"For a dead job it writes the audit row (job_id, prev_token, " +
		"prev_reason, at_ms, note) and makes the job pending with attempts 0, available_at now and a new " +
		"deadline, keeping the token. The next claim gets token 2, and the old holder's token 1 finish is refused.",
	Why: "Quarantine only helps if getting out of it is deliberate and recorded. Restarting the attempt budget is " +
		"right; reusing an ownership generation is not: if the redriven job handed out token 1 again, a sender " +
		"that held token 1 before the quarantine could finish the new run.",
	run: runStep5,
}

func runStep5(h *Harness) {
	const window = 50000
	h.Init()
	for _, id := range []string{"r-dead", "r-done", "r-lease"} {
		h.MustEnqueue(id, 7, t0, "--deadline-ms", fmt.Sprint(window))
	}
	h.MustEnqueue("r-pend", 7, t0+100000) // not due during this step
	held := h.ClaimAll("A", 3, t0, 30000)
	h.MustFinish("r-done", held["r-done"].Token, "ok", t0+1)
	h.MustFinish("r-dead", held["r-dead"].Token, "permanent", t0+1)
	ids := []string{"r-dead", "r-done", "r-lease", "r-pend"}
	before := h.ShowAll(ids...)

	whyRefuse := "only a quarantined job can be redriven: redriving a pending or leased job would hand it out " +
		"twice, and a done one would deliver the order again"
	for _, c := range []struct {
		id   string
		code int
	}{{"r-pend", 9}, {"r-lease", 10}, {"r-done", 11}, {"no-such-order", 8}} {
		r := h.Redrive(c.id, "TICKET-1", t0+2)
		h.ExpectExit(fmt.Sprintf("redrive of %s is refused", c.id), c.code, r.Run, whyRefuse)
	}
	whyNote := "the note lands in the audit record: only a ticket-like identifier is allowed, so raw error text " +
		"or personal data never gets there by accident"
	for _, note := range []string{"needs a look", "TICKET-\u00fc", "TICKET\t42", "-x42", strings.Repeat("x", 65)} {
		r := h.Redrive("r-dead", note, t0+2)
		h.ExpectExit(fmt.Sprintf("redrive of r-dead with note %q is refused as invalid", note), 3, r.Run, whyNote)
	}
	// The audit row and the state change are one transaction: make the change
	// fail after the audit row may have been written, and look for the row.
	trap := h.TrapUpdates("r-dead")
	failed := h.Redrive("r-dead", "TICKET-7", t0+3)
	trap.Remove()
	h.Check("a redrive of r-dead whose state change fails is reported as a failure",
		failed.Run.Code != 0 || failed.Run.Signal != "", "a non-zero exit", failed.Run.Exit()+stderrHint(failed.Run),
		"every update of r-dead was made to fail: a redrive that reports success here did not change the job")
	s := h.MustShow("r-dead")
	h.Equal("the failed redrive left no audit row and r-dead unchanged",
		before["r-dead"].Job.Canon+" redrives=0", fmt.Sprintf("%s redrives=%d", s.Job.Canon, len(s.Redrives)),
		"the audit row and the state change commit together or not at all: an audit row for a redrive that did "+
			"not happen (written in its own transaction, before the change failed) is a false record")

	after := h.ShowAll(ids...)
	for _, id := range ids {
		h.Equal(fmt.Sprintf("after the refusals, %s is unchanged and has no redrive row", id),
			before[id].Job.Canon+" redrives=0",
			fmt.Sprintf("%s redrives=%d", after[id].Job.Canon, len(after[id].Redrives)),
			"a refused redrive writes nothing (CONTRACT §6): no half-redrive, no audit row for something that did not happen")
	}

	// The redrive itself, with the longest note allowed: the other side of the
	// 65-byte refusal above.
	at := int64(t0 + 5000)
	dead := before["r-dead"].Job
	note := "TICKET-42/" + strings.Repeat("9", 54)
	rd := h.Redrive("r-dead", note, at)
	h.ExpectExit("redrive of the dead job r-dead, with a note of 64 bytes", 0, rd.Run,
		"a person looked at it and allowed it to run again; 64 bytes is the longest note the contract allows")
	j := rd.Job
	h.Equal("after the redrive: state, reason, attempts, available_at, deadline_at",
		fmt.Sprintf("pending reason=null attempts=0 available_at=%d deadline_at=%d", at, at+window),
		fmt.Sprintf("%s reason=%s attempts=%d available_at=%d deadline_at=%d", j.State, show(j.Reason), j.Attempts, j.AvailableAt, j.DeadlineAt),
		"a redrive is a fresh start for the budget: all attempts again, due now, a new deadline from the same window")
	h.Equal("after the redrive: the token is not rolled back", dead.Token, j.Token,
		"the token counts grants forever; resetting it would make an old holder's token valid again")
	s = h.MustShow("r-dead")
	want := Redrive{JobID: "r-dead", PrevToken: dead.Token, PrevReason: "permanent", AtMs: at, Note: note}
	h.Equal("the redrive's answer carries the audit row", fmt.Sprintf("%+v", want), fmt.Sprintf("%+v", rd.Redrive),
		"the operator sees at once what was recorded (CONTRACT §3: {\"job\":JOB,\"redrive\":REDRIVE})")
	got := "none"
	if len(s.Redrives) > 0 {
		got = fmt.Sprintf("%d row(s), last %+v", len(s.Redrives), s.Redrives[len(s.Redrives)-1])
	}
	h.Equal("the audit row is there, with the job's change", fmt.Sprintf("1 row(s), last %+v", want), got,
		"the audit row and the state change are one transaction: a redrive nobody can trace back is a quiet rewrite of history")
	h.Equal("show agrees: r-dead is pending with the same token", "pending token="+fmt.Sprint(dead.Token),
		fmt.Sprintf("%s token=%d", s.Job.State, s.Job.Token), "the redrive's answer and the stored row must agree")

	// The old holder wakes up; then a new holder claims; then the old one tries again.
	stale := h.Finish("r-dead", dead.Token, "ok", at+1)
	h.ExpectNotApplied("the pre-quarantine holder finishes with its old token 1 after the redrive", stale, s.Job,
		"the redriven job is not leased to anyone: an old completion must not decide the new run")
	c := h.Claim("B", at+1, 30000)
	h.ExpectExit("claim after the redrive", 0, c.Run, "the redriven job is due at once")
	h.Equal("the claim after the redrive grants the next token, never a reused one",
		fmt.Sprintf("r-dead token=%d attempts=1", dead.Token+1),
		fmt.Sprintf("%s token=%d attempts=%d", c.Job.ID, c.Job.Token, c.Job.Attempts),
		"attempts restart at 1, but the token continues: restarting the budget and reusing a generation are two different things")
	h.ExpectNotApplied("the old holder's token 1 finish, now that B holds token 2", h.Finish("r-dead", dead.Token, "ok", at+2), c.Job,
		"this is the stale completion the kept token exists to refuse: A's token 1 must not finish B's run")
	f := h.MustFinish("r-dead", c.Job.Token, "ok", at+3)
	h.Equal("B finishes with its own token", "done", f.State, "the current holder's outcome is recorded")
}
