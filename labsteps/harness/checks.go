package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"

	"snacklab/labsteps/result"
)

// stepFailed is the panic that ends a step at its first failed check.
type stepFailed struct{}

// Check records a judgement and ends the step if it failed. A check that
// fails once the step's time limit has been reached counts as timed out: its
// processes may have been killed by the limit rather than gone wrong.
func (h *Harness) Check(what string, ok bool, expected, observed, why string) {
	h.record(result.Check{What: what, Expected: expected, Observed: observed, Why: why, OK: ok})
}

// Timeout ends the step with a failure that is a wait running out, not a
// wrong answer: what the step waited for, what it saw when the wait ended,
// and why it waited. The message adds the limits and their calibration.
func (h *Harness) Timeout(what, expected, observed, why string) {
	h.record(result.Check{What: what, Expected: expected, Observed: observed, Why: why, TimedOut: true})
}

// Clause names the CONTRACT.md clause ids (§2.enqueue.dup) that the checks
// made after it in this harness judge, until the next call; a check that
// names its own keeps them. A part run by Parallel starts with none.
func (h *Harness) Clause(ids ...string) {
	h.mu.Lock()
	h.clause = append([]string(nil), ids...)
	h.mu.Unlock()
}

// record keeps c and, when it failed, ends the step.
func (h *Harness) record(c result.Check) {
	c.At = h.since()
	// A backstop for checks that quote a program's output whole: the
	// report carries what was observed, not all a program printed.
	c.Observed = bound(c.Observed, MaxCheckText)
	if c.Part == "" {
		c.Part = h.part
	}
	h.mu.Lock()
	if c.Clause == nil && len(h.clause) > 0 {
		c.Clause = append([]string(nil), h.clause...)
	}
	h.mu.Unlock()
	if !c.OK && !c.TimedOut && h.stepTimeUp() {
		c.TimedOut = true
		c.Observed += fmt.Sprintf(" (the step's time limit of %v had been reached)", h.Limits.Step)
	}
	if !c.OK && !c.TimedOut && h.stop.stopped() {
		c.TimedOut = true
		c.Observed += " (the step had been stopped at a failed check: StopAt)"
	}
	if !c.OK && !c.TimedOut && errors.Is(h.ctx.Err(), context.Canceled) {
		// Ctrl-C or SIGTERM ended the run: what failed after that was cut
		// short, not answered wrongly (the runner calls the step INTERRUPTED).
		c.TimedOut = true
		c.Observed += " (the run had been interrupted)"
	}
	if c.TimedOut {
		c.Observed += "; timed out — " + h.Limits.String()
	}
	h.mu.Lock()
	h.checks = append(h.checks, c)
	h.mu.Unlock()
	if c.OK {
		h.Narrate("✓ %s: %s", c.What, c.Observed)
		return
	}
	mark := "✗"
	if c.TimedOut {
		mark = "✗ TIMEOUT:"
	}
	h.Narrate("%s %s\n      expected: %s\n      observed: %s\n      why: %s", mark, c.What, c.Expected, c.Observed, c.Why)
	h.Event(result.LaneHarness, "check", mark+" "+c.What, result.NoClock, true)
	h.stop.check(c)
	panic(stepFailed{})
}

// stopper ends a step at the first failed check its rule holds for.
type stopper struct {
	at   func(result.Check) bool
	stop context.CancelFunc
	done atomic.Bool
}

// StopAt ends the step, every part of it, at the first failed check for
// which at holds: its processes are ended and its waits return, and a check
// that fails after that counts as a wait that ran out (TimedOut), never as
// a wrong answer. stop cancels the context the harness was made with. The
// self-test sets it to "a check on the mutant's clause": one rejection is
// all it needs of a step. Call it before the step starts.
func (h *Harness) StopAt(at func(result.Check) bool, stop context.CancelFunc) {
	h.stop = &stopper{at: at, stop: stop}
}

// check stops the step when c is a failure the rule holds for.
func (s *stopper) check(c result.Check) {
	if s != nil && !c.OK && !c.TimedOut && s.at(c) && !s.done.Swap(true) {
		s.stop()
	}
}

// stopped reports whether the step has been stopped.
func (s *stopper) stopped() bool { return s != nil && s.done.Load() }

// stepTimeUp reports whether the step's time limit has been reached.
func (h *Harness) stepTimeUp() bool {
	return errors.Is(h.ctx.Err(), context.DeadlineExceeded)
}

// Equal checks that got is want, comparing their printed forms (so 7 and
// int64(7) are equal, and a nil pointer prints as null).
func (h *Harness) Equal(what string, want, got any, why string) {
	w, g := Repr(want), Repr(got)
	h.Check(what, w == g, w, g, why)
}

// Fatalf ends the step with a failure that is not a comparison, such as a
// process that could not start.
func (h *Harness) Fatalf(what, expected, why, format string, args ...any) {
	h.Check(what, false, expected, fmt.Sprintf(format, args...), why)
}

// Repr prints a value the way a check message shows it.
func Repr(v any) string {
	if v == nil {
		return "null"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		return Repr(rv.Elem().Interface())
	}
	switch x := v.(type) {
	case string:
		return x
	case json.RawMessage:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// DecodeObject parses exactly one JSON value from s into v.
func DecodeObject(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
