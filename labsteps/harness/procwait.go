package harness

import (
	"fmt"
	"time"
)

// WaitEnd says how a wait ended.
type WaitEnd int

const (
	CondHeld   WaitEnd = iota // what was waited for happened
	ProcExited                // the process ended without it: an answer
	LimitHit                  // WaitLimit ran out while the process still ran
	StepEnded                 // the step's time limit (or the run) ended it
)

// WaitLines blocks until cond holds of the lines printed so far (evaluated
// with the lines locked, on every new line and at the exit), the process
// exits, or the wait limit passes, and says which ended the wait.
func (p *Proc) WaitLines(cond func([]Line) bool) WaitEnd {
	return p.waitFor(func() bool { return cond(p.lines) })
}

// waitFor blocks until cond holds (evaluated under the lock on every
// change), the process exits, or the wait limit passes, and says which.
func (p *Proc) waitFor(cond func() bool) WaitEnd {
	timer := time.NewTimer(p.h.WaitLimit)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ok, exited, ch := cond(), p.exited, p.notify
		p.mu.Unlock()
		if ok {
			return CondHeld
		}
		if exited {
			return ProcExited
		}
		select {
		case <-ch:
		case <-timer.C:
			return LimitHit
		case <-p.h.ctx.Done():
			return StepEnded
		}
	}
}

// WaitLine waits for a line matching match and returns it; if none comes, the
// step fails with what the process printed and how it ended.
func (p *Proc) WaitLine(what string, match func(Line) bool, why string) Line {
	var found Line
	t0 := time.Now()
	end := p.waitFor(func() bool {
		for _, l := range p.lines {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	switch end {
	case ProcExited:
		p.h.Check(what, false, "a line that shows it", p.Observed(), why)
	case LimitHit, StepEnded:
		p.h.Timeout(what, "a line that shows it within "+p.h.WaitLimit.String(), p.observedAfter(p.waited(end, t0)), why)
	}
	return found
}

// WaitEvent waits for the JSON line {"event": kind} (CONTRACT §4).
func (p *Proc) WaitEvent(kind, why string) Line {
	return p.WaitLine(fmt.Sprintf("%s prints {\"event\":%q}", p.Name, kind),
		func(l Line) bool { return l.Str("event") == kind }, why)
}

// waited is how long a wait that began at t0 and ended with end lasted:
// the limit itself when it ran out.
func (p *Proc) waited(end WaitEnd, t0 time.Time) time.Duration {
	if end == LimitHit {
		return p.h.WaitLimit
	}
	return time.Since(t0).Round(time.Millisecond)
}

// Wait waits for the process to end and returns its exit code and signal.
func (p *Proc) Wait(why string) (code int, signal string) {
	t0 := time.Now()
	if end := p.waitFor(func() bool { return p.exited }); end != CondHeld {
		p.h.Timeout(p.Name+" exits", "the process ends within "+p.h.WaitLimit.String(), p.observedAfter(p.waited(end, t0)), why)
	}
	_, code, signal = p.Exited()
	return code, signal
}
