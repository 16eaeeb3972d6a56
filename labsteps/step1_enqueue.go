package labsteps

import (
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
)

// newJob describes a job as a fresh enqueue must make it (CONTRACT §2 enqueue).
func newJob(j harness.Job) string {
	return fmt.Sprintf("id=%s qty=%d %s reason=%s attempts=%d max_attempts=%d token=%d owner=%s lease_until=%s available_at=%d deadline_at=%d deadline_window_ms=%d",
		j.ID, j.Qty, j.State, harness.Repr(j.Reason), j.Attempts, j.MaxAttempts, j.Token, harness.Repr(j.Owner), harness.Repr(j.LeaseUntil), j.AvailableAt, j.DeadlineAt, j.DeadlineWindowMs)
}

// enqueueBounds: every value enqueue takes, at both sides of its bounds
// (CONTRACT §1), and the fields of a new job, defaults included.
func enqueueBounds(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-values.db")
	h.Init()
	refuseOutOfRange(h)

	// Integers are plain decimal: any other spelling is a usage error (exit 2),
	// never read as some number.
	refuseNonPlainIntegers(h)

	// The shared flags of every verb: --busy-timeout-ms is 0 … 86400000.
	busyTimeoutBounds(h)

	acceptBoundValues(h)
}

// Why each value enqueue takes has its bounds.
const (
	whyID     = "an order id is 1–64 bytes of A–Z a–z 0–9 . _ : - starting with a letter or digit (CONTRACT §1): ids are printed in logs and alerts, so only bounded identifiers get in"
	whyQty    = "a quantity is 1 … 1000000 (CONTRACT §1): an order of nothing, or of more than the shop can hold, is a mistake to refuse at the door"
	whyMax    = "max attempts is 1 … 1000 (CONTRACT §1): zero attempts could never be delivered, and an unbounded budget retries a poison order forever"
	whyWindow = "the deadline window is 1 ms … one year (CONTRACT §1): an empty window makes the order late before it starts"
	whyNow    = "the clock is ms since the epoch, never negative (CONTRACT §1)"
	whyNowMax = "the clock is at most 2^53−1 ms (CONTRACT §1), the largest integer every JSON reader holds exactly: a larger one would be printed as a number some readers round"
)

// enqueueCall is an enqueue of id with qty 7 at now, with extra flags.
func enqueueCall(id string, now int64, extra ...string) harness.Call {
	return harness.Call{Verb: "enqueue", Now: now, Args: append([]string{"--id", id, "--qty", "7"}, extra...)}
}

// refuseOutOfRange: each value one step outside its bounds is invalid
// input (exit 3), however large.
func refuseOutOfRange(h *harness.Harness) {
	h.Clause("§1.id", "§1.qty", "§1.max-attempts", "§1.deadline-window", "§1.now", "§1.invalid", "§1.int.range", "§3.stdout.refusal", "§6.nothing-written")
	h.ExpectRefused([]harness.Refusal{
		{What: "a 65-byte id", Call: enqueueCall(strings.Repeat("x", 65), t0), Code: 3, Why: whyID},
		{What: "id \"-o-1\" (not starting with a letter or digit)", Call: enqueueCall("-o-1", t0), Code: 3, Why: whyID},
		{What: "id \"_o\" (not starting with a letter or digit)", Call: enqueueCall("_o", t0), Code: 3, Why: whyID},
		{What: "id \"o/1\" (a character outside the pattern)", Call: enqueueCall("o/1", t0), Code: 3, Why: whyID},
		{What: "qty 0", Call: harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "q-0", "--qty", "0"}}, Code: 3, Why: whyQty},
		{What: "qty 1000001", Call: harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "q-big", "--qty", "1000001"}}, Code: 3, Why: whyQty},
		{What: "--max-attempts 0", Call: enqueueCall("m-0", t0, "--max-attempts", "0"), Code: 3, Why: whyMax},
		{What: "--max-attempts 1001", Call: enqueueCall("m-big", t0, "--max-attempts", "1001"), Code: 3, Why: whyMax},
		{What: "--deadline-ms 0", Call: enqueueCall("w-0", t0, "--deadline-ms", "0"), Code: 3, Why: whyWindow},
		{What: "--deadline-ms 31536000001 (a year and 1 ms)", Call: enqueueCall("w-big", t0, "--deadline-ms", "31536000001"), Code: 3, Why: whyWindow},
		{What: "--now-ms -1", Call: enqueueCall("n-neg", -1, "--now-ms", "-1"), Code: 3, Why: whyNow},
		{What: "--now-ms 9007199254740992 (2^53)", Call: enqueueCall("n-big", -1, "--now-ms", "9007199254740992"), Code: 3, Why: whyNowMax},
		{What: "qty 99999999999999999999 (beyond any 64-bit integer)", Call: harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "q-huge", "--qty", "99999999999999999999"}}, Code: 3, Why: whyQty + "; a well-formed number out of range is invalid input (exit 3) however large, not a malformed flag (CONTRACT §1)"},
		{What: "--max-attempts 18446744073709551616 (2^64)", Call: enqueueCall("m-huge", t0, "--max-attempts", "18446744073709551616"), Code: 3, Why: whyMax + "; a well-formed number out of range is invalid input (exit 3) however large, not a malformed flag (CONTRACT §1)"},
	}, nil)
}

// refuseNonPlainIntegers: every other spelling of an integer is malformed.
func refuseNonPlainIntegers(h *harness.Harness) {
	h.Clause("§1.int.plain", "§3.stdout.refusal", "§6.nothing-written")
	whyPlain := "every integer on a command line is plain decimal: an optional -, then digits with no leading zero (CONTRACT §1); " +
		"a typo such as 010 or +7 is refused as malformed (exit 2) rather than read as a number the operator may not have meant"
	var plain []harness.Refusal
	for _, c := range []struct{ flag, value string }{
		{"--qty", "010"}, {"--qty", "+7"}, {"--qty", "0x10"}, {"--qty", "1_000"}, {"--qty", "1e3"}, {"--qty", " 7"},
		{"--max-attempts", "-0"}, {"--max-attempts", "05"}, {"--deadline-ms", "+1000"},
	} {
		args := []string{"--id", "plain-1", "--qty", "7", c.flag, c.value}
		if c.flag == "--qty" {
			args = []string{"--id", "plain-1", "--qty", c.value}
		}
		plain = append(plain, harness.Refusal{What: fmt.Sprintf("%s %q", c.flag, c.value),
			Call: harness.Call{Verb: "enqueue", Now: t0, Args: args}, Code: 2, Why: whyPlain})
	}
	h.ExpectRefused(plain, nil)
}

// busyTimeoutBounds: --busy-timeout-ms on either side of its bounds.
func busyTimeoutBounds(h *harness.Harness) {
	h.Clause("§3.flags", "§1.int.range", "§3.stdout.refusal", "§6.nothing-written")
	whyBusy := "--busy-timeout-ms is 0 … 86400000 (one day; CONTRACT §3): a writer that would wait longer than a day for a lock is a mistake to refuse"
	h.ExpectRefused([]harness.Refusal{
		{What: "--busy-timeout-ms 86400001", Call: enqueueCall("bt-big", t0, "--busy-timeout-ms", "86400001"), Code: 3, Why: whyBusy},
		{What: "--busy-timeout-ms -1", Call: enqueueCall("bt-neg", t0, "--busy-timeout-ms", "-1"), Code: 3, Why: whyBusy},
	}, nil)
	h.Clause("§3.flags")
	for _, c := range []struct{ id, ms string }{{"bt-0", "0"}, {"bt-max", "86400000"}} {
		r := h.Queuectl("enqueue", t0, "--id", c.id, "--qty", "7", "--busy-timeout-ms", c.ms)
		h.ExpectExit("enqueue with --busy-timeout-ms "+c.ms+" is accepted", 0, r,
			"--busy-timeout-ms takes 0 (meaning 5000) to 86400000 on every verb (CONTRACT §3)")
	}
}

// acceptedValue is an enqueue at a bound that must be accepted, and the job
// it must make.
type acceptedValue struct {
	what             string
	call             harness.Call
	id               string
	qty, max, window int64
	now              int64
	why              string
}

// acceptBoundValues: each value at its bounds is accepted, and makes a new
// job with the values given and the defaults for the rest.
func acceptBoundValues(h *harness.Harness) {
	h.Clause("§1.id", "§1.qty", "§1.max-attempts", "§1.deadline-window", "§1.now", "§2.enqueue.new", "§3.enqueue.flags", "§3.enqueue.json", "§3.json.job")
	id64 := "A" + strings.Repeat("b", 62) + "9"
	cases := []acceptedValue{
		{"no --max-attempts or --deadline-ms: the defaults 5 and 86400000", enqueueCall("d-def", t0), "d-def", 7, 5, 86400000, t0,
			"the defaults are part of the contract (CONTRACT §3): a sender and an operator must agree on when an order is given up"},
		{"a 64-byte id", enqueueCall(id64, t0), id64, 7, 5, 86400000, t0, whyID},
		{"id \"9\" (one digit)", enqueueCall("9", t0), "9", 7, 5, 86400000, t0, whyID},
		{"qty 1", harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "q-1", "--qty", "1"}}, "q-1", 1, 5, 86400000, t0, whyQty},
		{"qty 1000000", harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "q-max", "--qty", "1000000"}}, "q-max", 1000000, 5, 86400000, t0, whyQty},
		{"--max-attempts 1", enqueueCall("m-1", t0, "--max-attempts", "1"), "m-1", 7, 1, 86400000, t0, whyMax},
		{"--max-attempts 1000", enqueueCall("m-1000", t0, "--max-attempts", "1000"), "m-1000", 7, 1000, 86400000, t0, whyMax},
		{"--deadline-ms 1", enqueueCall("w-1", t0, "--deadline-ms", "1"), "w-1", 7, 5, 1, t0, whyWindow},
		{"--deadline-ms 31536000000 (one year)", enqueueCall("w-year", t0, "--deadline-ms", "31536000000"), "w-year", 7, 5, 31536000000, t0, whyWindow},
		{"--now-ms 0", enqueueCall("n-0", 0), "n-0", 7, 5, 86400000, 0, whyNow},
		{"--now-ms 9007199254740991 (2^53−1) and --deadline-ms 1", enqueueCall("n-max", 9007199254740991, "--deadline-ms", "1"), "n-max", 7, 5, 1, 9007199254740991, whyNowMax},
	}
	calls := make([]harness.Call, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	runs := h.CallsInTurn(calls)
	for i, c := range cases {
		h.ExpectExit("enqueue with "+c.what+" is accepted", 0, runs[i], c.why)
		var e harness.Enqueued
		h.Parse(runs[i], &e)
		want := harness.Job{ID: c.id, Qty: c.qty, State: "pending", MaxAttempts: c.max, AvailableAt: c.now,
			DeadlineAt: c.now + c.window, DeadlineWindowMs: c.window}
		h.Equal("…as a new job: pending, due now, deadline now+window, attempts 0, token 0, no owner", newJob(want)+" duplicate=false",
			newJob(e.Job)+fmt.Sprintf(" duplicate=%t", e.Duplicate),
			"a new job is due at once and must be delivered before now + its window; no grant has happened yet, so "+
				"token and attempts are 0 (the first claim grants token 1). "+c.why)
	}
}
