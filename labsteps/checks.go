package labsteps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Check is one judgement a step made: what was looked at, what the contract
// expects, what the implementation did, and why it matters.
type Check struct {
	What     string        `json:"what"`
	Expected string        `json:"expected"`
	Observed string        `json:"observed"`
	Why      string        `json:"why"`
	OK       bool          `json:"ok"`
	At       time.Duration `json:"at_ns"`
	// TimedOut says the check failed because a wait ran out (the process
	// was still running, its output still open, or the step's time limit
	// was reached), not because the implementation answered wrongly: on a
	// busy machine, a reason to re-run rather than a wrong answer.
	TimedOut bool `json:"timed_out,omitempty"`
}

// stepFailed is the panic that ends a step at its first failed check.
type stepFailed struct{}

// Check records a judgement and ends the step if it failed. A check that
// fails once the step's time limit has been reached counts as timed out: its
// processes may have been killed by the limit rather than gone wrong.
func (h *Harness) Check(what string, ok bool, expected, observed, why string) {
	h.record(Check{What: what, Expected: expected, Observed: observed, Why: why, OK: ok})
}

// Timeout ends the step with a failure that is a wait running out, not a
// wrong answer: what the step waited for, what it saw when the wait ended,
// and why it waited. The message adds the limits and their calibration.
func (h *Harness) Timeout(what, expected, observed, why string) {
	h.record(Check{What: what, Expected: expected, Observed: observed, Why: why, TimedOut: true})
}

// record keeps c and, when it failed, ends the step.
func (h *Harness) record(c Check) {
	c.At = h.since()
	if !c.OK && !c.TimedOut && h.stepTimeUp() {
		c.TimedOut = true
		c.Observed += fmt.Sprintf(" (the step's time limit of %v had been reached)", h.Limits.Step)
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
	h.Event(LaneHarness, "check", mark+" "+c.What, noClock, true)
	panic(stepFailed{})
}

// stepTimeUp reports whether the step's time limit has been reached.
func (h *Harness) stepTimeUp() bool {
	return errors.Is(h.ctx.Err(), context.DeadlineExceeded)
}

// Equal checks that got is want, comparing their printed forms (so 7 and
// int64(7) are equal, and a nil pointer prints as null).
func (h *Harness) Equal(what string, want, got any, why string) {
	w, g := show(want), show(got)
	h.Check(what, w == g, w, g, why)
}

// Fatalf ends the step with a failure that is not a comparison, such as a
// process that could not start.
func (h *Harness) Fatalf(what, expected, why, format string, args ...any) {
	h.Check(what, false, expected, fmt.Sprintf(format, args...), why)
}

// show prints a value the way a check message shows it.
func show(v any) string {
	if v == nil {
		return "null"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		return show(rv.Elem().Interface())
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

// decodeObject parses exactly one JSON value from s into v.
func decodeObject(s string, v any) error {
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
