package harness

import (
	"fmt"
	"strconv"
	"time"
)

// ShortBusyMs is the --busy-timeout-ms a process gets when the lock checks
// want it to give up while the harness still holds the write lock.
const ShortBusyMs = 100

// BusyFlag is the flag and value that give a process the short busy timeout.
var BusyFlag = []string{"--busy-timeout-ms", strconv.Itoa(ShortBusyMs)}

// ExpectGivesUp checks a writing process p that runs with --busy-timeout-ms
// ShortBusyMs while the harness holds the write lock: it tries the lock, waits
// at least its busy timeout from that first refused attempt (the times come
// from strace, not from when the harness looked), then exits 6, having written
// nothing: the queue file's bytes are still before (lock.Digest() taken
// before p started), and no journal is left.
func (h *Harness) ExpectGivesUp(what string, p *Traced, lock *WriteLock, before string) {
	first := p.WaitRefused(what+": it tries the write lock",
		"a busy timeout is a wait for the lock: the process must try it, be refused, and wait")
	code, sig := p.Wait("a process whose busy timeout ran out ends with exit 6 (CONTRACT §6)")
	h.Check(what+": exit 6 (database busy past the busy timeout)", code == 6 && sig == "",
		"exit 6", ExitText(code, sig)+"; "+p.Observed(),
		"busy past the busy timeout has its own exit code, so a caller can tell \"try again later\" from a real failure")
	tr := p.Trace()
	end, ok := exitCall(tr)
	waited := end.Time.Sub(first.Time)
	obs := fmt.Sprintf("%.1f ms (trace %s)", ms(waited), p.TraceFile)
	if !ok {
		obs = "no exit_group in the trace " + p.TraceFile
	}
	h.Check(fmt.Sprintf("%s: waited at least its busy timeout (%d ms) after its first refused lock attempt", what, ShortBusyMs),
		ok && waited >= ShortBusyMs*time.Millisecond,
		fmt.Sprintf("≥ %d ms from the refused attempt to exit_group", ShortBusyMs), obs,
		"--busy-timeout-ms is how long a process waits for another's lock before giving up; one that gives up sooner fails under any contention")
	h.Equal(what+": nothing written (the queue file's bytes unchanged, no journal left)", before, lock.Digest(),
		"a process that could not get the lock must leave the queue exactly as it was: no job changed, no audit row")
}

// ExpectWaitsThenSucceeds checks a writing process p that runs with the
// default busy timeout (or its own --busy-timeout-ms) while the harness holds
// the write lock: once its trace shows it tried the lock and was refused
// (never earlier: a process that has not tried yet proves nothing), the
// harness releases the lock, and p must then succeed (exit 0). A deferred
// transaction that cannot upgrade, or a busy timeout that is ignored, gives
// up instead. A process that gave up only after waiting its whole busy
// timeout, every attempt refused while the harness still held the lock, met
// a machine too slow to judge it: TIMEOUT (judgeBusyExit).
func (h *Harness) ExpectWaitsThenSucceeds(what string, lock *WriteLock, p *Traced) {
	p.WaitRefused(what+": it tries the write lock",
		"the check releases the lock only once the process is waiting for it")
	h.ExpectStillWaiting(what+": still waiting for the lock after a refused attempt", p,
		"a writer that gives up at the first refusal fails whenever two processes meet: with a busy timeout it must wait (a deferred transaction that reads first cannot wait: begin it IMMEDIATE)")
	lock.Release()
	code, sig := p.Wait("the lock is free again: the process gets it and ends")
	what += ": succeeds once the lock is released (exit 0)"
	why := "a writer that waits as the contract says gets the lock once it is released, within its busy timeout, and does its work"
	if code != 0 || sig != "" {
		h.judgeBusyExit(what, "exit 0", why, p, code, sig, lock.released)
	}
	h.Check(what, true, "exit 0", ExitText(code, sig), why)
}

// ExpectStillWaiting checks that p, whose trace shows a refused attempt at
// the write lock the harness holds, has not ended: it waits for the lock.
// One that ended busy after waiting out its whole busy timeout met a machine
// too slow to judge it (TIMEOUT); any other end is a wrong answer.
func (h *Harness) ExpectStillWaiting(what string, p *Traced, why string) {
	if ex, code, sig := p.Exited(); ex {
		h.judgeBusyExit(what, fmt.Sprintf("waiting (its busy timeout is %d ms)", p.busyMs()), why, p, code, sig, time.Time{})
	}
}
