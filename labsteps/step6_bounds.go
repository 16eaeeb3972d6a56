package labsteps

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

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
