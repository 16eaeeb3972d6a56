package labsteps

import (
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
}

// stepFailed is the panic that ends a step at its first failed check.
type stepFailed struct{}

// Check records a judgement and ends the step if it failed.
func (h *Harness) Check(what string, ok bool, expected, observed, why string) {
	c := Check{What: what, Expected: expected, Observed: observed, Why: why, OK: ok, At: h.since()}
	h.mu.Lock()
	h.checks = append(h.checks, c)
	h.mu.Unlock()
	if ok {
		h.Narrate("✓ %s: %s", what, observed)
		return
	}
	h.Narrate("✗ %s\n      expected: %s\n      observed: %s\n      why: %s", what, expected, observed, why)
	h.Event(LaneHarness, "check", "✗ "+what, noClock, true)
	panic(stepFailed{})
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
