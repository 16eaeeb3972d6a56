package labsteps

import (
	"fmt"
	"slices"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

var step5 = Step{
	Step: result.Step{
		Num: 5, Slug: "redrive",
		Title: "Redrive: refused unless dead, notes are ticket ids, audit row with the change, token never rolls back; nothing else leaves quarantine",
		Checks: "Redrive is refused for a pending (exit 9), leased (10), done (11) and unknown (8) job, and for notes " +
			"that are free text, non-ASCII, control characters, too long (65 bytes; 64 is accepted) or not starting " +
			"with a letter or digit (exit 3), each time with nothing on stdout and the queue file unchanged, byte for byte. " +
			"In every state (pending, leased, done, dead) a conflicting enqueue (another qty) is refused (exit 7) and a " +
			"duplicate (same qty) is accepted as duplicate:true, both changing nothing — a dead job is not revived, a " +
			"done one not reset; investigate records its row and leaves the whole job unchanged; investigate and show " +
			"of an unknown id exit 8, writing nothing. show lists every redrive and investigation of a job in time " +
			"order (oldest or newest first), and none of another job's. A redrive whose state change fails (the lab makes every write of " +
			"the job's row — update, delete or insert — fail for a moment) leaves no audit row: the row and the change are one transaction. " +
			"For a dead job it writes the audit row (job_id, prev_token, " +
			"prev_reason, at_ms, note) and makes the job pending with attempts 0, available_at now and a new " +
			"deadline, keeping the token. The next claim gets token 2, and the old holder's token 1 finish is refused. " +
			"Every verb's --json answer has the members CONTRACT §3 lists (JOB's 14, reason, owner and lease_until null when unset; " +
			"finish of an unknown id with job null; show's empty lists []; stats's zeros), one object and one newline; and " +
			"`check` finds audit rows that name no job (exit 5, at most --max listed), and each invariant of its list broken in a job of its own (a hand edit with the CHECK constraints off). Where `dead` and `alerts` are " +
			"offered (optional), `dead --json` lists two dead jobs oldest first, each with its last attempt's evidence and " +
			"latest investigation, `--limit 1` only the oldest, and `alerts` with no threshold exits 0 while nothing is " +
			"dead and 22 once a job is. " +
			"Generated from a model of the contract (labsteps/model): three seeded sequences of 40 enqueue, claim, finish, redrive, " +
			"show and stats commands, the clock on every lease, backoff and deadline boundary, each answer's exit code and pinned " +
			"JSON members compared with the model's; a mismatch is shown shrunk, as commands to replay.",
		Why: "Quarantine only helps if getting out of it is deliberate and recorded. Restarting the attempt budget is " +
			"right; reusing an ownership generation is not: if the redriven job handed out token 1 again, a sender " +
			"that held token 1 before the quarantine could finish the new run.",
	},
	run: runStep5,
}

func runStep5(h *harness.Harness) {
	h.Parallel(
		harness.Part{Name: "a: refusals, duplicates, investigations and the redrive", Run: redriveStory},
		harness.Part{Name: "b: show lists a job's whole history, in time order", Run: redriveHistory},
		harness.Part{Name: "c: every verb's JSON answer, member by member", Run: verbShapes},
		harness.Part{Name: "d: check finds audit rows that name no job and each invariant broken", Run: checkFindsOrphans},
		harness.Part{Name: "e: the operator's dead list and alerts (optional verbs)", Run: operatorVerbs},
		harness.Part{Name: "f: generated: random sequences against a model of the contract", Run: modelSequences},
	)
}

// redriveStory: what may not leave quarantine, what may not change a job,
// and the redrive that does.
func redriveStory(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json", "§3.show.json")
	h.Init()
	for _, id := range []string{"r-dead", "r-done", "r-lease"} {
		h.MustEnqueue(id, 7, t0, "--deadline-ms", fmt.Sprint(redriveWindow))
	}
	h.MustEnqueue("r-pend", 7, t0+100000) // not due during this step
	held := h.ClaimAll("A", 3, t0, 30000)
	h.MustFinish("r-done", held["r-done"].Token, "ok", t0+1)
	h.MustFinish("r-dead", held["r-dead"].Token, "permanent", t0+1)
	ids := []string{"r-dead", "r-done", "r-lease", "r-pend"}
	before := h.ShowAll(ids...)

	refuseRedriveAndConflict(h, ids, before)
	refuseNotesAndUnknownIDs(h, before)
	duplicatesChangeNothing(h, ids, before)
	investigationsChangeNothing(h, ids, before)
	failedRedriveLeavesNoRow(h, before)
	at := int64(t0 + 5000)
	dead := before["r-dead"].Job
	rd := redriveDeadJob(h, dead, at)
	s := judgeRedriveAudit(h, dead, rd, at)
	oldHolderIsFenced(h, dead, s, at)
}

// redriveWindow is the deadline window of part a's jobs, which a redrive
// measures its new deadline by.
const redriveWindow = 50000

// longestNote is a note of 64 bytes, the longest the contract allows.
var longestNote = "TICKET-42/" + strings.Repeat("9", 54)

// whyNote is why a note is refused.
const whyNote = "the note lands in the audit record: only a ticket-like identifier is allowed, so raw error text " +
	"or personal data never gets there by accident"

// refuseRedriveAndConflict: a job that is not dead may not be redriven, and
// another qty under a known id is a conflict, whatever the job's state.
func refuseRedriveAndConflict(h *harness.Harness, ids []string, before map[string]harness.Shown) {
	whyRefuse := "only a quarantined job can be redriven: redriving a pending or leased job would hand it out " +
		"twice, and a done one would deliver the order again"
	whyConflict := "two different orders under one id would make the id useless as evidence: the second is refused " +
		"(exit 7) whatever state the first is in, and no field of the first changes"
	h.Clause("§2.redrive.refused", "§2.enqueue.conflict", "§3.stdout.refusal", "§6.nothing-written", "§2.time.untouched")
	var rs []harness.Refusal
	for _, c := range []struct {
		id, what string
		code     int
	}{{"r-pend", "pending", 9}, {"r-lease", "leased", 10}, {"r-done", "done", 11}, {"no-such-order", "unknown", 8}} {
		rs = append(rs, harness.Refusal{What: fmt.Sprintf("the %s job %s", c.what, c.id),
			Call: harness.Call{Verb: "redrive", Now: t0 + 2, Args: []string{"--id", c.id, "--note=TICKET-1"}}, Code: c.code, Why: whyRefuse})
	}
	for _, id := range ids {
		rs = append(rs, harness.Refusal{What: fmt.Sprintf("%s (%s) again with qty 8 instead of 7", id, stateReason(before[id].Job)),
			Call: harness.Call{Verb: "enqueue", Now: t0 + 2, Args: []string{"--id", id, "--qty", "8"}}, Code: 7, Why: whyConflict})
	}
	h.ExpectRefusedInTurn(rs, before)
}

// refuseNotesAndUnknownIDs: a note that is not ticket-like is refused, and
// so is an unknown id, by investigate and by show.
func refuseNotesAndUnknownIDs(h *harness.Harness, before map[string]harness.Shown) {
	h.Clause("§1.note", "§2.investigate.unknown", "§3.show.unknown", "§1.invalid", "§3.stdout.refusal", "§6.nothing-written")
	var rs []harness.Refusal
	for _, note := range []string{"needs a look", "TICKET-\u00fc", "TICKET\t42", "-x42", strings.Repeat("x", 65)} {
		rs = append(rs, harness.Refusal{What: fmt.Sprintf("r-dead and note %q", note),
			Call: harness.Call{Verb: "redrive", Now: t0 + 2, Args: []string{"--id", "r-dead", "--note=" + note}}, Code: 3, Why: whyNote})
	}
	rs = append(rs,
		harness.Refusal{What: "an unknown id", Call: harness.Call{Verb: "investigate", Now: t0 + 2, Args: []string{"--id", "no-such-order", "--note=INV-1"}},
			Code: 8, Why: "there is no job to have looked at: not found (exit 8), and no investigation row for a job that does not exist"},
		harness.Refusal{What: "r-dead and a free-text note", Call: harness.Call{Verb: "investigate", Now: t0 + 2, Args: []string{"--id", "r-dead", "--note=looked at it"}},
			Code: 3, Why: whyNote},
		harness.Refusal{What: "an unknown id", Call: harness.Call{Verb: "show", Now: -1, Args: []string{"--id", "no-such-order"}},
			Code: 8, Why: "not found is exit 8 (CONTRACT §6), so a script can tell a missing job from a broken queue"},
	)
	h.ExpectRefused(rs, before)
}

// duplicatesChangeNothing: duplicates of a job in every state are accepted,
// and nothing changes.
func duplicatesChangeNothing(h *harness.Harness, ids []string, before map[string]harness.Shown) {
	h.Clause("§2.enqueue.dup", "§2.time.untouched", "§3.enqueue.json")
	var dups []harness.Call
	// Same id and qty, other budget and window: still a duplicate (only
	// another qty is a conflict), and the answer is the job as stored.
	for _, id := range ids {
		dups = append(dups, harness.Call{Verb: "enqueue", Now: t0 + 2, Args: []string{"--id", id, "--qty", "7", "--max-attempts", "9", "--deadline-ms", "123456"}})
	}
	runs := h.ExpectNoWrite("a duplicate changes nothing (CONTRACT §2 enqueue): a dead job is not revived (only a redrive "+
		"brings it back, with its audit row), a done one not reset, and not even updated_at moves", dups, before)
	for i, id := range ids {
		what := fmt.Sprintf("enqueue of %s (%s) again with the same qty (another budget and window)", id, stateReason(before[id].Job))
		h.ExpectExit(what+" succeeds", 0, runs[i], "a client that lost the answer retries; the retry must succeed, not fail, whatever became of the order since")
		var e harness.Enqueued
		h.Parse(runs[i], &e)
		h.Equal(what+": reported as a duplicate", true, e.Duplicate, "the client learns its first submission already counted")
		h.Equal(what+": the answer's job is the job as stored, not the request's values", before[id].Job.Canon, e.Job.Canon,
			"CONTRACT §3: {\"job\":JOB,\"duplicate\":true} reports the job as it is; the duplicate's --max-attempts 9 and --deadline-ms 123456 changed nothing")
	}
}

// investigationsChangeNothing: investigations in every state are recorded,
// and the job never changes.
func investigationsChangeNothing(h *harness.Harness, ids []string, before map[string]harness.Shown) {
	h.Clause("§2.investigate.row", "§3.investigate.json")
	var invs []harness.Call
	for _, id := range ids {
		invs = append(invs, harness.Call{Verb: "investigate", Now: t0 + 3, Args: []string{"--id", id, "--note=" + invNote(id)}})
	}
	runs := h.CallsInTurn(invs)
	for i, id := range ids {
		what := fmt.Sprintf("investigate %s (%s)", id, stateReason(before[id].Job))
		h.ExpectExit(what, 0, runs[i], "a person may look at a job in any state")
		var v harness.Investigated
		h.Parse(runs[i], &v)
		h.Equal(what+": the answer is the investigation row", fmt.Sprintf("%+v", harness.Investigation{JobID: id, AtMs: t0 + 3, Note: invNote(id)}),
			fmt.Sprintf("%+v", v.Investigation), "the operator sees what was recorded (CONTRACT §3)")
	}
	h.Clause("§2.investigate.unchanged", "§2.investigate.row", "§2.time.untouched", "§2.enqueue.dup", "§3.show.history")
	looked := h.ShowAll(ids...)
	for _, id := range ids {
		h.Equal(fmt.Sprintf("after the refusals, the duplicate and the investigation, %s is unchanged, with one investigation and no redrive", id),
			fmt.Sprintf("%s redrives=0 investigations=[%+v]", before[id].Job.Canon, harness.Investigation{JobID: id, AtMs: t0 + 3, Note: invNote(id)}),
			fmt.Sprintf("%s redrives=%d investigations=%+v", looked[id].Job.Canon, len(looked[id].Redrives), looked[id].Investigations),
			"looking is not fixing: investigate adds its row and never changes the job (CONTRACT §2) — not its state, "+
				"not its lease, not updated_at — so a dead job stays quarantined and a leased one stays its holder's")
	}
}

// failedRedriveLeavesNoRow: the audit row and the state change are one
// transaction: make the change fail after the audit row may have been
// written, and look for the row.
func failedRedriveLeavesNoRow(h *harness.Harness, before map[string]harness.Shown) {
	h.Clause("§2.file.jobs-table") // the trap is a trigger on the table jobs, keyed by id
	trap := h.TrapUpdates("r-dead")
	h.Clause("§2.redrive.atomic")
	failed := h.Redrive("r-dead", "TICKET-7", t0+3)
	trap.Remove()
	h.Check("a redrive of r-dead whose state change fails is reported as a failure",
		failed.Run.Code != 0 || failed.Run.Signal != "", "a non-zero exit", failed.Run.Exit()+failed.Run.StderrHint(),
		"every write of r-dead's row (update, delete, insert) was made to fail: a redrive that reports success here did not change the job")
	s := h.MustShow("r-dead")
	h.Equal("the failed redrive left no audit row and r-dead unchanged",
		before["r-dead"].Job.Canon+" redrives=0", fmt.Sprintf("%s redrives=%d", s.Job.Canon, len(s.Redrives)),
		"the audit row and the state change commit together or not at all: an audit row for a redrive that did "+
			"not happen (written in its own transaction, before the change failed) is a false record")
}

// redriveDeadJob: the redrive itself, at at, with the longest note allowed
// (the other side of the 65-byte refusal above), and the job it leaves.
func redriveDeadJob(h *harness.Harness, dead harness.Job, at int64) harness.Redriven {
	h.Clause("§1.note", "§2.redrive.reset", "§2.state.reason", "§3.redrive.json")
	rd := h.Redrive("r-dead", longestNote, at)
	h.ExpectExit("redrive of the dead job r-dead, with a note of 64 bytes", 0, rd.Run,
		"a person looked at it and allowed it to run again; 64 bytes is the longest note the contract allows")
	j := rd.Job
	h.Equal("after the redrive: state, reason, attempts, available_at, deadline_at",
		fmt.Sprintf("pending reason=null attempts=0 available_at=%d deadline_at=%d", at, at+redriveWindow),
		fmt.Sprintf("%s reason=%s attempts=%d available_at=%d deadline_at=%d", j.State, harness.Repr(j.Reason), j.Attempts, j.AvailableAt, j.DeadlineAt),
		"a redrive is a fresh start for the budget: all attempts again, due now, a new deadline from the same window")
	h.Clause("§2.redrive.reset", "§2.state.keep", "§2.time.created", "§2.time.updated", "§2.state.only-named")
	wantJ := dead
	wantJ.State, wantJ.Reason, wantJ.Attempts, wantJ.AvailableAt, wantJ.DeadlineAt, wantJ.UpdatedAt = "pending", nil, 0, at, at+redriveWindow, at
	h.Equal("after the redrive: every other field as the dead job had it (id, qty, budget, token, window, created_at)",
		wantJ.Fields(), j.Fields(),
		"CONTRACT §2: a redrive resets state, reason, attempts, available_at and deadline_at and moves updated_at; no path changes id or qty, and nothing else is redrive's to change")
	h.Clause("§2.redrive.token")
	h.Equal("after the redrive: the token is not rolled back", dead.Token, j.Token,
		"the token counts grants forever; resetting it would make an old holder's token valid again")
	h.Clause("§2.time.updated", "§2.time.created")
	h.Equal("after the redrive: created_at kept, updated_at the redrive's now",
		fmt.Sprintf("created_at=%d updated_at=%d", dead.CreatedAt, at),
		fmt.Sprintf("created_at=%d updated_at=%d", j.CreatedAt, j.UpdatedAt),
		"CONTRACT §2: created_at is the now of the enqueue, whatever happens later; updated_at is the now of the latest operation that changed the job, and a redrive changes it")
	return rd
}

// judgeRedriveAudit checks the redrive's audit row, in its answer and in
// show, and returns the job as show has it.
func judgeRedriveAudit(h *harness.Harness, dead harness.Job, rd harness.Redriven, at int64) harness.Shown {
	h.Clause("§2.redrive.audit", "§3.redrive.json", "§3.json.redrive", "§3.show.json")
	s := h.MustShow("r-dead")
	want := harness.Redrive{JobID: "r-dead", PrevToken: dead.Token, PrevReason: "permanent", AtMs: at, Note: longestNote}
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
	return s
}

// oldHolderIsFenced: the old holder wakes up; then a new holder claims;
// then the old one tries again.
func oldHolderIsFenced(h *harness.Harness, dead harness.Job, s harness.Shown, at int64) {
	h.Clause("§2.redrive.token", "§2.finish.fence", "§2.finish.not-applied", "§2.claim.grant")
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

// redriveHistory: two jobs redriven and investigated in turn; show lists every
// row of the one asked for, in time order, and none of the other's.
func redriveHistory(h *harness.Harness) {
	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json", "§2.investigate.row", "§2.redrive.reset", "§2.redrive.token")
	h.UseQueue("queue-history.db")
	h.Init()
	h.MustEnqueue("h-1", 7, t0, "--max-attempts", "1")
	h.MustEnqueue("h-2", 7, t0)
	held := h.ClaimAll("A", 2, t0, 30000)
	h.MustFinish("h-1", held["h-1"].Token, "permanent", t0+1)
	h.MustFinish("h-2", held["h-2"].Token, "permanent", t0+1)
	investigate := func(id, note string, at int64) {
		v := h.Investigate(id, note, at)
		h.ExpectExit(fmt.Sprintf("investigate %s with note %s", id, note), 0, v.Run, "the step builds a job's history")
	}
	redrive := func(id, note string, at int64) {
		r := h.Redrive(id, note, at)
		h.ExpectExit(fmt.Sprintf("redrive of the dead job %s with note %s", id, note), 0, r.Run, "the step builds a job's history")
	}
	investigate("h-1", "INV-1", t0+10)
	redrive("h-1", "FIX-1", t0+20)
	investigate("h-2", "INV-OTHER", t0+21)
	redrive("h-2", "FIX-OTHER", t0+22)
	c := h.Claim("B", t0+30, 30000)
	h.Equal("B claims the redriven h-1 (due since t0+20, before h-2)", "h-1 token=2", fmt.Sprintf("%s token=%d", c.Job.ID, c.Job.Token),
		"a redriven job is due at once, and keeps counting tokens")
	f := h.MustFinish("h-1", c.Job.Token, "retry", t0+31)
	h.Equal("h-1's only attempt fails again", "dead(exhausted)", stateReason(*f), "its budget after the redrive is one attempt")
	investigate("h-1", "INV-2", t0+40)
	redrive("h-1", "FIX-2", t0+50)
	investigate("h-1", "INV-3", t0+60)

	h.Clause("§3.show.history", "§3.show.json", "§3.json.redrive", "§2.redrive.audit")
	s := h.MustShow("h-1")
	wantRd := []harness.Redrive{
		{JobID: "h-1", PrevToken: 1, PrevReason: "permanent", AtMs: t0 + 20, Note: "FIX-1"},
		{JobID: "h-1", PrevToken: 2, PrevReason: "exhausted", AtMs: t0 + 50, Note: "FIX-2"},
	}
	wantInv := []harness.Investigation{
		{JobID: "h-1", AtMs: t0 + 10, Note: "INV-1"},
		{JobID: "h-1", AtMs: t0 + 40, Note: "INV-2"},
		{JobID: "h-1", AtMs: t0 + 60, Note: "INV-3"},
	}
	why := "show is how a person reconstructs what happened to an order: every redrive and every investigation of " +
		"that job, in time order (CONTRACT §3), and nothing of another job's"
	// Oldest first is the reference's order; newest first is as good a
	// history (CONTRACT v1 did not fix the direction), so either passes.
	inOrder := func(want, got []string) bool {
		rev := slices.Clone(got)
		slices.Reverse(rev)
		return slices.Equal(want, got) || slices.Equal(want, rev)
	}
	rds, invs := rows(s.Redrives), rows(s.Investigations)
	h.Check("show h-1 lists its two redrives in time order, with the token and reason each one ended",
		inOrder(rows(wantRd), rds), fmt.Sprintf("%+v (or newest first)", wantRd), fmt.Sprintf("%+v", s.Redrives), why)
	h.Check("show h-1 lists its three investigations in time order", inOrder(rows(wantInv), invs),
		fmt.Sprintf("%+v (or newest first)", wantInv), fmt.Sprintf("%+v", s.Investigations), why)
	h.Clause("§2.redrive.reset", "§2.redrive.token")
	h.Equal("…and h-1 is pending again after FIX-2, with its token kept", "pending token=2 attempts=0",
		fmt.Sprintf("%s token=%d attempts=%d", s.Job.State, s.Job.Token, s.Job.Attempts), "each redrive restarts the budget and keeps the token")
}

// rows prints each audit row, for comparing histories in either direction.
func rows[T any](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%+v", x)
	}
	return out
}

// invNote is the investigation note of job id in part a: 64 bytes, the
// longest the contract allows, so that a note kept short shows.
func invNote(id string) string {
	n := "INV-" + id + "-"
	return n + strings.Repeat("9", 64-len(n))
}
