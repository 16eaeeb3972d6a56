package harness

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps/systrace"
)

// DefaultBusyMs is the busy timeout a program started without
// --busy-timeout-ms waits for another process's lock (CONTRACT §3, §4).
const DefaultBusyMs = 5000

// ContractDefault, as SenderOpts.TimeoutMs, leaves the flag out: the
// program runs with the contract's default, for a check that judges it.
const ContractDefault = -1

// maxFlagMs is the largest value the contract's millisecond flags take.
const maxFlagMs = 86400000

// PatienceMs is the value, in ms, of every time limit a process gets that
// the step does not judge: a sender's --timeout-ms while the harness keeps
// its answer, a busy timeout in a part about something else. A slow machine
// must never make such a limit run out and turn a correct program into a
// wrong answer, so it is the step's own time limit (at least three waits,
// at least a minute): the step ends first, as TIMEOUT.
func (h *Harness) PatienceMs() int64 {
	d := max(h.Limits.Step, 3*h.WaitLimit, time.Minute)
	return min(d.Milliseconds(), maxFlagMs)
}

// patience is PatienceMs as a duration: how long the lab's own servers
// wait for a request's headers.
func (h *Harness) patience() time.Duration { return time.Duration(h.PatienceMs()) * time.Millisecond }

// PatientBusy is --busy-timeout-ms PatienceMs, for a process that meets the
// harness's write lock in a part that does not judge its busy timeout.
func (h *Harness) PatientBusy() []string {
	return []string{"--busy-timeout-ms", strconv.FormatInt(h.PatienceMs(), 10)}
}

// busyMs is the busy timeout p runs with: its --busy-timeout-ms, else the
// contract's default, which 0 also means (CONTRACT §3, §4).
func (p *Proc) busyMs() int64 {
	for i, a := range p.Args {
		v, ok := strings.CutPrefix(a, "--busy-timeout-ms=")
		if !ok && a == "--busy-timeout-ms" && i+1 < len(p.Args) {
			v, ok = p.Args[i+1], true
		}
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil && n > 0 {
			return n
		}
	}
	return DefaultBusyMs
}

// lockWait is what a trace says about a process's wait for the write lock
// the harness held, timed from its first refused attempt.
type lockWait struct {
	refused      int           // refused write-lock attempts
	last         time.Duration // the last refused attempt
	exit         time.Duration // exit_group; -1 when not in the trace
	release      time.Duration // when the harness began to release the lock; -1: not yet
	afterRelease bool          // a refused attempt began after the release began
}

// readLockWait reads t's trace against released (zero: the lock is still
// held). Times are the trace's (strace -ttt) and the harness's wall clock.
func (t *Traced) readLockWait(tr *systrace.Trace, released time.Time) (lockWait, bool) {
	w := lockWait{exit: -1, release: -1}
	first, ok := t.firstRefused(tr)
	if !ok {
		return w, false
	}
	if !released.IsZero() {
		w.release = released.Sub(first.Time)
	}
	for _, c := range tr.Calls {
		if !t.refusedWriteLock(c) {
			continue
		}
		w.refused++
		w.last = c.Time.Sub(first.Time)
		if w.release >= 0 && w.last >= w.release {
			w.afterRelease = true
		}
	}
	if end, ok := exitCall(tr); ok {
		w.exit = end.Time.Sub(first.Time)
	}
	return w, true
}

// waitedOut reports whether the process waited its whole busy timeout
// (9/10 of it, for the grain of its sleeps) while every attempt it made
// was refused by the harness's lock: then the harness, not the program, was
// too slow, and an exit 6 is no wrong answer.
func (w lockWait) waitedOut(busy int64) bool {
	return w.exit >= 0 && !w.afterRelease && w.exit >= time.Duration(busy)*time.Millisecond*9/10
}

// String says what the trace shows, in ms from the first refused attempt.
func (w lockWait) String() string {
	s := fmt.Sprintf("by its trace, %d refused attempts on the write lock, the last %.1f ms after the first", w.refused, ms(w.last))
	if w.exit >= 0 {
		s += fmt.Sprintf(", exit_group %.1f ms after the first", ms(w.exit))
	}
	if w.release < 0 {
		return s + "; the harness still held the lock"
	}
	return s + fmt.Sprintf("; the harness began releasing the lock %.1f ms after its first refused attempt", ms(w.release))
}

// judgeBusyExit judges a process that ended with code and sig while it was
// to wait for the write lock (released zero: the harness still holds it).
// An exit 6 after waiting out its whole busy timeout while the harness held
// the lock is a TIMEOUT: the machine was too slow to release it in time. Any
// other early end is a wrong answer, said with what the trace shows. Either
// way the step ends here.
func (h *Harness) judgeBusyExit(what, expected, why string, p *Traced, code int, sig string, released time.Time) {
	busy := p.busyMs()
	obs := ExitText(code, sig)
	w, ok := p.readLockWait(p.Trace(), released)
	if ok {
		obs += "; " + w.String()
	}
	if ok && code == 6 && sig == "" && w.waitedOut(busy) {
		h.Timeout(what, expected, fmt.Sprintf("%s — it waited out its busy timeout of %d ms, every attempt refused while the harness held the lock", obs, busy),
			"the machine was too slow for the harness to release the lock within the process's busy timeout; a process that waits as the contract says is no wrong answer")
	}
	switch {
	case code == 6 && ok && w.exit >= 0 && w.exit < time.Duration(busy)*time.Millisecond && (w.release < 0 || w.exit < w.release):
		obs += fmt.Sprintf(" — busy after %.1f ms, before its busy timeout of %d ms ran out, while the harness still held the lock: it did not wait "+
			"(a busy timeout of 0, or a deferred transaction that read first and then could not upgrade to a write)", ms(w.exit), busy)
	case code == 6 && ok && w.release >= 0 && w.exit >= w.release && !w.afterRelease:
		obs += " — busy, with no attempt on the lock after the harness released it"
	}
	h.Check(what, false, expected, obs+"; "+p.Observed()+" (trace "+filepath.Base(p.TraceFile)+")", why)
}
