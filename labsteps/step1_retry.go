package labsteps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// t0 is the injected clock at the start of every step, in ms. Any value would
// do; a small one keeps the arithmetic in the messages readable.
const t0 = 10_000

var step1 = Step{
	Step: result.Step{
		Num: 1, Slug: "retry",
		Title: "Retry function: backoff, cap, jitter, and the retry/exhausted/deadline decision",
		Checks: "`queuectl backoff` gives exactly the contract's delay (base 1 s doubling to a 60 s cap, " +
			"with jitter from FNV-1a of \"id:attempt\"), and `finish retry` decides at each boundary: " +
			"budget left → pending at now+backoff; attempts = max → dead(exhausted), even past the deadline; " +
			"next = deadline → dead(deadline); next = deadline−1 → pending. Enqueue takes every value at both sides of " +
			"its bounds (id 64 bytes and a first letter or digit, qty 1 … 1000000, max attempts 1 … 1000, deadline window " +
			"1 ms … one year, now ≥ 0): each refusal exits 3, prints nothing on stdout and leaves the queue file as it was; " +
			"each accepted job is new as the contract says (pending, due now, deadline now+window, attempts 0, token 0, " +
			"defaults 5 and 86400000). enqueue, claim and show refuse a missing queue file (exit 4) without creating " +
			"it, and a text file or another application's SQLite file (exit 5) without changing it. `queuectl check` says ok " +
			"(exit 0) of a healthy queue and exits 5 once its b-tree pages are damaged on disk. " +
			"init too refuses another application's unmarked SQLite file (exit 5, unchanged), and every verb a file in WAL mode; " +
			"stats, check, finish, redrive, investigate and the sender refuse a missing file (exit 4, nothing created); init " +
			"refuses a missing directory; a bad flag value is 3 (or 2) even with the file missing, with one stderr line; each program's help exits 0 naming its flags. " +
			"Generated from the contract's value rules (labsteps/rules): every flag of every program and every member of the receiver's " +
			"bodies is tried at each end of its range and one past it, each spelling of a number, lengths 0, 1, max and max+1 of a " +
			"pattern and each character class at its first and a later byte; a refused value exits 2 or 3 (400 in a body) and writes nothing, " +
			"an accepted one gets past the flags.",
		Why: "A retry that fires at once takes the slot of healthy orders; one that never stops hides a " +
			"poison order forever. Deterministic jitter spreads retries out and still lets anyone predict them.",
	},
	run: runStep1,
}

func runStep1(h *harness.Harness) {
	h.Parallel(
		harness.Part{Name: "a: backoff and the retry decision", Run: retryDecision},
		harness.Part{Name: "b: enqueue's values at their bounds", Run: enqueueBounds},
		harness.Part{Name: "c: a missing file, and files that are not a queue", Run: notAQueue},
		harness.Part{Name: "d: no program takes over a file that is not its queue", Run: theirFiles},
		harness.Part{Name: "e: every program's help names its flags", Run: helpTexts},
		harness.Part{Name: "f: generated: value rules on every flag", Run: generatedValues},
	)
}

// retryDecision: the backoff formula, and finish retry at each boundary.
func retryDecision(h *harness.Harness) {
	h.Clause("§2.backoff.formula", "§3.backoff.json") // the delays are read from backoff --json
	whyBackoff := "the delay is part of the contract: exponential so a failing receiver is not hammered, " +
		"capped so a job is retried within a minute, jittered from the id so retries spread out yet stay predictable"
	var cases []harness.BackoffCase
	for a := 1; a <= 8; a++ {
		cases = append(cases, harness.BackoffCase{ID: "o-1", Attempt: a})
	}
	cases = append(cases, harness.BackoffCase{ID: "snack:order-9", Attempt: 1}, harness.BackoffCase{ID: "snack:order-9", Attempt: 6},
		harness.BackoffCase{ID: "snack:order-9", Attempt: 7}, harness.BackoffCase{ID: "snack:order-9", Attempt: 1000})
	got := h.Backoffs(cases)
	for i, c := range cases {
		want := expectedBackoff(c.ID, c.Attempt)
		d := backoffCeiling(c.Attempt)
		h.Equal(fmt.Sprintf("backoff(%s, %d), within [%d, %d]", c.ID, c.Attempt, d/2, d), want, got[i].DelayMs, whyBackoff)
	}
	h.Clause("§3.backoff.flags", "§3.backoff.json", "§3.stdout.refusal")
	for i, c := range cases {
		h.Equal(fmt.Sprintf("`queuectl backoff --id %s --attempt %d --json`: the id and attempt it answers about", c.ID, c.Attempt),
			fmt.Sprintf("id=%s attempt=%d", c.ID, c.Attempt), fmt.Sprintf("id=%s attempt=%d", got[i].ID, got[i].Attempt),
			"CONTRACT §3: backoff answers {\"id\",\"attempt\",\"delay_ms\"} about the attempt asked, so a log of answers says which delay belongs to which try")
	}
	whyAttempt := "`queuectl backoff` takes an attempt 1 … 1000 and an order id (CONTRACT §3, §1): attempt 0 has no delay to speak of, and a value outside the range is invalid input, exit 3, nothing on stdout"
	bad := [][]string{{"--id", "o-1", "--attempt", "0"}, {"--id", "o-1", "--attempt", "1001"}, {"--id", "o 1", "--attempt", "1"}}
	cmds := make([][]string, len(bad))
	for i, b := range bad {
		cmds[i] = append([]string{"queuectl", "backoff", "--json"}, b...)
	}
	for i, r := range h.ExecAll(cmds) {
		what := strings.Join(bad[i], " ")
		h.ExpectExit("`queuectl backoff "+what+"` is refused", 3, r, whyAttempt)
		h.Equal("…and prints nothing on stdout ("+what+")", "", harness.Trim(r.Stdout), whyAttempt)
	}

	h.Clause("§3.init.json", "§3.enqueue.json", "§3.claim.json", "§3.finish.json")
	h.Init()
	const window = 5000
	// Four jobs, all due at t0, each to be failed at one boundary.
	h.MustEnqueue("a-dl-eq", 7, t0, "--deadline-ms", fmt.Sprint(window))
	h.MustEnqueue("b-dl-lt", 7, t0, "--deadline-ms", fmt.Sprint(window))
	h.MustEnqueue("c-ex", 7, t0, "--max-attempts", "2")
	h.MustEnqueue("d-both", 7, t0, "--max-attempts", "1", "--deadline-ms", "400")
	held := h.ClaimAll("W", 4, t0, 30000)

	// c-ex: attempt 1 of 2 fails → pending at now + backoff(c-ex, 1).
	h.Clause("§2.finish.retry.pending", "§2.backoff.formula", "§2.claim.due")
	b1 := expectedBackoff("c-ex", 1)
	f := h.MustFinish("c-ex", held["c-ex"].Token, "retry", t0)
	h.Equal("retry with budget left (attempt 1 of 2): state", "pending", f.State,
		"a temporary failure with attempts left is tried again later, not dropped")
	h.Equal("retry with budget left: available_at = now + backoff(c-ex, 1)", t0+b1, f.AvailableAt, whyBackoff)
	c := h.Claim("W", t0+b1, 30000)
	h.Equal("claim at available_at brings c-ex back", "c-ex", c.Job.ID, "a backed-off job is due exactly at available_at")
	h.Clause("§2.finish.retry.exhausted")
	f = h.MustFinish("c-ex", c.Job.Token, "retry", t0+b1)
	h.Equal("retry at attempt 2 of 2: state and reason", "dead(exhausted)", stateReason(*f),
		"when the last attempt fails the job is quarantined with its evidence, not retried forever")

	// d-both: the last attempt, and the deadline passed too: exhausted wins.
	h.Clause("§2.finish.retry.exhausted")
	f = h.MustFinish("d-both", held["d-both"].Token, "retry", t0+b1)
	h.Equal("retry at attempt 1 of 1 past the deadline: state and reason", "dead(exhausted)", stateReason(*f),
		"the contract checks the attempt budget first, so the reason names the limit that was really used up")

	// a-dl-eq: fail it so that now + backoff lands exactly on the deadline.
	h.Clause("§2.finish.retry.deadline")
	dl := int64(t0 + window)
	now := dl - expectedBackoff("a-dl-eq", 1)
	f = h.MustFinish("a-dl-eq", held["a-dl-eq"].Token, "retry", now)
	h.Equal(fmt.Sprintf("retry whose next try (%d) equals deadline_at (%d): state and reason", dl, dl), "dead(deadline)", stateReason(*f),
		"a try scheduled at the deadline would already be too late: the deadline is not a time to try at")
	// b-dl-lt: one ms earlier, the job is retried, at deadline - 1.
	h.Clause("§2.finish.retry.pending", "§2.finish.retry.deadline")
	now = dl - expectedBackoff("b-dl-lt", 1) - 1
	f = h.MustFinish("b-dl-lt", held["b-dl-lt"].Token, "retry", now)
	h.Equal(fmt.Sprintf("retry whose next try is deadline_at−1 (%d): state", dl-1), "pending", f.State,
		"one ms before the deadline there is still time: quarantining it would drop a deliverable order")
	h.Equal("…and it is due at deadline_at−1", dl-1, f.AvailableAt, whyBackoff)
}

// stateReason is "dead(exhausted)" or "pending".
func stateReason(j harness.Job) string {
	if j.Reason == nil {
		return j.State
	}
	return j.State + "(" + *j.Reason + ")"
}

// notAQueue: only `queuectl init` creates the queue file; every other verb
// refuses a missing file (exit 4) without creating it, and a file that is not
// a queue (exit 5) without touching it (CONTRACT §2, §6).
func notAQueue(h *harness.Harness) {
	h.Clause("§2.file.missing", "§3.stdout.refusal")
	verbs := []harness.Call{
		{Verb: "enqueue", Now: t0, Args: []string{"--id", "o-1", "--qty", "7"}},
		{Verb: "claim", Now: t0, Args: []string{"--owner", "A"}},
		{Verb: "show", Now: -1, Args: []string{"--id", "o-1"}},
	}
	h.UseQueue("no-such-queue.db")
	runs := h.Calls(verbs)
	whyMissing := "only `queuectl init` creates the queue file: a program that quietly starts an empty queue at a " +
		"mistyped path accepts orders nobody will ever deliver"
	for i, c := range verbs {
		h.ExpectExit(fmt.Sprintf("`queuectl %s` on a missing queue file is refused as missing", c.Verb), 4, runs[i], whyMissing)
		h.Equal(fmt.Sprintf("…and prints nothing on stdout (%s)", c.Verb), "", harness.Trim(runs[i].Stdout),
			"a program reading stdout must never mistake an error for an answer (CONTRACT §3)")
	}
	for _, suffix := range []string{"", "-journal", "-wal"} {
		_, err := os.Stat(h.DB + suffix)
		h.Equal("no file "+filepath.Base(h.DB+suffix)+" was created by the refused commands", "absent", harness.Presence(err), whyMissing)
	}

	h.Clause("§2.file.foreign", "§3.stdout.refusal", "§6.nothing-written")
	whyNot := "a file that is not a snacklab queue (not SQLite at all, or another application's SQLite file) is refused " +
		"(exit 5) and left as it was: reading it as a queue, or \"fixing\" it, would damage someone else's data"
	h.UseQueue("notes.txt")
	if err := h.WriteScratch(h.DB, []byte(strings.Repeat("these are not the orders you are looking for\n", 100))); err != nil {
		h.Fatalf("the harness writes a text file", "the file is written", whyNot, "%v", err)
	}
	var rs []harness.Refusal
	for _, c := range verbs {
		rs = append(rs, harness.Refusal{What: "a text file as the queue", Call: c, Code: 5, Why: whyNot})
	}
	h.ExpectRefused(rs, nil)

	h.UseQueue("other-app.db")
	h.MakeSQLite("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello'); PRAGMA user_version = 99;")
	rs = rs[:0]
	for _, c := range verbs {
		rs = append(rs, harness.Refusal{What: "another application's SQLite file (a table notes, no table jobs, user_version 99) as the queue", Call: c, Code: 5, Why: whyNot})
	}
	h.ExpectRefused(rs, nil)
	damagedQueue(h)
}

// damagedQueue: `queuectl check` finds a healthy queue healthy (exit 0,
// {"ok":true,…}) and one whose b-tree pages were damaged on disk damaged
// (exit 5), whatever the implementation's schema: every page after the
// first that is a b-tree page gets an invalid page type, which SQLite's
// integrity check, the first thing check runs (CONTRACT §3), reports.
func damagedQueue(h *harness.Harness) {
	h.Clause("§3.init.json", "§2.enqueue.new")
	h.UseQueue("queue-damaged.db")
	h.Init()
	for i := range 3 {
		h.MustEnqueue(fmt.Sprintf("damaged-job-%d", i+1), 7, t0)
	}
	why := "CONTRACT §3: check runs SQLite's integrity check, then the contract's invariants, and exits 5 listing the problems; an operator runs it after a crash or a disk error to learn whether the queue can be trusted"
	h.Clause("§3.check.ok")
	before := h.Snapshot()
	r := h.Queuectl("check", -1)
	h.ExpectExit("`queuectl check` of a healthy queue", 0, r, why)
	var ok struct {
		OK       *bool           `json:"ok"`
		Total    *int64          `json:"total"`
		Problems json.RawMessage `json:"problems"`
	}
	if r.Code == 0 {
		h.Parse(r, &ok)
	}
	var problems bytes.Buffer
	if json.Compact(&problems, ok.Problems) != nil || problems.Len() == 0 {
		problems.Reset()
		problems.WriteString("missing")
	}
	h.Equal("…says ok, with a total of 0 and an empty list of problems", "ok=true total=0 problems=[]",
		fmt.Sprintf("ok=%s total=%s problems=%s", harness.Repr(ok.OK), harness.Repr(ok.Total), problems.String()),
		why+`; a healthy queue is exactly {"ok":true,"total":0,"problems":[]}: a program reading the report iterates over problems, and null is not a list`)

	// The verbs that only read leave the file as it was, byte for byte.
	h.Clause("§3.read-only")
	whyRO := "CONTRACT §3: stats, show and check only read; they never write to the file, not even a journal mode, a version mark or " +
		"the planner's statistics, so that looking at a queue (after a crash, on a copy kept as evidence) cannot change it"
	for _, c := range [][]string{{"stats"}, {"show", "--id", "damaged-job-1"}} {
		r := h.Queuectl(c[0], -1, c[1:]...)
		h.ExpectExit("`queuectl "+strings.Join(c, " ")+"` of a healthy queue", 0, r, whyRO)
	}
	h.ExpectUnchanged(before, nil, whyRO, "check; stats; show --id damaged-job-1")

	h.Clause("§3.check.integrity")
	b, err := harness.ReadNoFollow(h.DB)
	if err != nil || len(b) < 100 {
		h.Fatalf("the harness reads the queue file", "a SQLite file", why, "%d bytes, %v", len(b), err)
	}
	size := int(b[16])<<8 | int(b[17])
	if size == 1 {
		size = 65536
	}
	// Only the pages that hold the jobs (their rows and index entries, found
	// by the ids): a program may read its own bookkeeping tables when it
	// opens the file, and a damage there would make any program refuse to
	// open, a stub check included; the jobs' pages only a check reads.
	damaged := 0
	for off := size; off+size <= len(b); off += size {
		switch b[off] {
		case 2, 5, 10, 13: // interior/leaf index and table b-tree pages
			if bytes.Contains(b[off:off+size], []byte("damaged-job-")) {
				b[off] = 0
				damaged++
			}
		}
	}
	if err := h.WriteScratch(h.DB, b); err != nil || damaged == 0 {
		h.Fatalf("the harness damages the queue file's b-tree pages", "at least one page damaged", why, "%d pages damaged, %v", damaged, err)
	}
	h.Action(fmt.Sprintf("damage the page type of the %d b-tree page(s) holding the jobs on disk", damaged), result.NoClock)
	r = h.Queuectl("check", -1)
	h.ExpectExit("`queuectl check` of the damaged queue finds the damage", 5, r,
		why+"; a check that says ok without looking gives a false all-clear on exactly the day it is needed")
}
