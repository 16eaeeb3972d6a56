package labsteps

import (
	"fmt"
	"strconv"
	"time"
)

// shortBusyMs is the --busy-timeout-ms a process gets when the lock checks
// want it to give up while the harness still holds the write lock.
const shortBusyMs = 100

// busyFlag is the flag and value that give a process the short busy timeout.
var busyFlag = []string{"--busy-timeout-ms", strconv.Itoa(shortBusyMs)}

// ExpectGivesUp checks a writing process p that runs with --busy-timeout-ms
// shortBusyMs while the harness holds the write lock: it tries the lock, waits
// at least its busy timeout from that first refused attempt (the times come
// from strace, not from when the harness looked), then exits 6, having written
// nothing: the queue file's bytes are still before (lock.Digest() taken
// before p started), and no journal is left.
func (h *Harness) ExpectGivesUp(what string, p *Traced, lock *WriteLock, before string) {
	first := p.WaitRefused(what+": it tries the write lock",
		"a busy timeout is a wait for the lock: the process must try it, be refused, and wait")
	code, sig := p.Wait("a process whose busy timeout ran out ends with exit 6 (CONTRACT §6)")
	h.Check(what+": exit 6 (database busy past the busy timeout)", code == 6 && sig == "",
		"exit 6", exitText(code, sig)+"; "+p.observed(),
		"busy past the busy timeout has its own exit code, so a caller can tell \"try again later\" from a real failure")
	tr := p.Trace()
	end, ok := exitCall(tr)
	waited := end.Time.Sub(first.Time)
	obs := fmt.Sprintf("%.1f ms (trace %s)", ms(waited), p.TraceFile)
	if !ok {
		obs = "no exit_group in the trace " + p.TraceFile
	}
	h.Check(fmt.Sprintf("%s: waited at least its busy timeout (%d ms) after its first refused lock attempt", what, shortBusyMs),
		ok && waited >= shortBusyMs*time.Millisecond,
		fmt.Sprintf("≥ %d ms from the refused attempt to exit_group", shortBusyMs), obs,
		"--busy-timeout-ms is how long a process waits for another's lock before giving up; one that gives up sooner fails under any contention")
	h.Equal(what+": nothing written (the queue file's bytes unchanged, no journal left)", before, lock.Digest(),
		"a process that could not get the lock must leave the queue exactly as it was: no job changed, no audit row")
}

// ExpectWaitsThenSucceeds checks a writing process p that runs with the
// default busy timeout while the harness holds the write lock: once its trace
// shows it tried the lock and was refused (never earlier: a process that has
// not tried yet proves nothing), the harness releases the lock, and p must
// then succeed (exit 0). A deferred transaction that cannot upgrade, or a
// busy timeout that is ignored, gives up instead.
func (h *Harness) ExpectWaitsThenSucceeds(what string, lock *WriteLock, p *Traced) {
	p.WaitRefused(what+": it tries the write lock",
		"the check releases the lock only once the process is waiting for it")
	if ex, code, sig := p.Exited(); ex {
		h.Check(what+": still waiting for the lock after a refused attempt", false,
			"waiting (the default busy timeout is 5000 ms)", exitText(code, sig)+"; "+p.observed(),
			"a writer that gives up at the first refusal fails whenever two processes meet: with a busy timeout it must wait (a deferred transaction that reads first cannot wait: begin it IMMEDIATE)")
	}
	lock.Release()
	code, sig := p.Wait("the lock is free again: the process gets it and ends")
	obs := exitText(code, sig) + "; " + p.observed()
	if code == 6 {
		obs += " — busy, although the harness released the lock right after its first refused attempt, well within the default 5000 ms: it did not wait " +
			"(a busy timeout of 0, or a deferred transaction that read first and then could not upgrade to a write)"
	}
	h.Check(what+": succeeds once the lock is released (exit 0)", code == 0 && sig == "", "exit 0", obs,
		"the lock was released well within the busy timeout: a writer that waits as the contract says gets it and does its work")
}
