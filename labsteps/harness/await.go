package harness

import (
	"context"
	"errors"
	"net"
	"time"
)

// awaitPoll is how often a wait with no change signal re-evaluates its
// condition.
const awaitPoll = 20 * time.Millisecond

// Await is the lab's one wait for something a step then requires: it blocks
// until cond holds, re-evaluating it each time changed's channel closes (or
// every awaitPoll when changed is nil), at most WaitLimit. When the limit or
// the step ends first, the step ends as a TIMEOUT saying what it waited
// for, what it expected and what observed() says now: a wait that runs out
// on a slow machine is never a wrong answer (issue #33). A wait that
// rightly ends with an answer (a process that exited) judges that answer
// after Until, never here.
func (h *Harness) Await(what, expected, why string, cond func() bool, changed func() <-chan struct{}, observed func() string) {
	if !h.Until(cond, changed) {
		h.Timeout(what, expected, observed(), why)
	}
}

// Until blocks as Await does and reports whether cond held, judging
// nothing: for a wait whose running out the caller weighs itself (with
// Timeout, never a failed Check).
func (h *Harness) Until(cond func() bool, changed func() <-chan struct{}) bool {
	timer := time.NewTimer(h.WaitLimit)
	defer timer.Stop()
	for {
		// The channel first: a change after it is taken closes it.
		var ch <-chan struct{}
		if changed != nil {
			ch = changed()
		}
		if cond() {
			return true
		}
		var tick <-chan time.Time
		if ch == nil {
			tick = time.After(awaitPoll)
		}
		select {
		case <-ch:
		case <-tick:
		case <-timer.C:
			return cond()
		case <-h.ctx.Done():
			return cond()
		}
	}
}

// ErrWaitedOut marks an answer the lab stopped waiting for (its wait limit
// or the step's ran out): not the program's answer, and never judged as one.
var ErrWaitedOut = errors.New("the lab's wait for it ran out")

// WaitedOut reports whether err is a wait of the lab's that ran out — a
// deadline of the lab's context or connection, or ErrWaitedOut — rather
// than something the program did.
func WaitedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, ErrWaitedOut) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.As(err, &ne) && ne.Timeout()
}

// TimedOut reports whether the answer is missing because the lab's wait for
// it ran out (WaitedOut).
func (a HTTPAnswer) TimedOut() bool { return a.Err != nil && WaitedOut(a.Err) }

// ExpectAnswered ends the step as a TIMEOUT when any of answers is missing
// because the lab's wait for it ran out: the check that would judge it,
// what, cannot tell a slow machine from a wrong answer. Call it before
// judging answers strictly.
func (h *Harness) ExpectAnswered(what, expected, why string, answers ...HTTPAnswer) {
	for _, a := range answers {
		if a.TimedOut() {
			h.Timeout(what, expected, a.String()+" (within "+h.WaitLimit.String()+")", why)
		}
	}
}
