package result

import (
	"fmt"
	"time"
)

// Calibration is how long the implementation under test takes to start and
// answer on this machine, measured just before the steps run. Every wait of
// the lab is derived from it (see Limits), so that a correct implementation
// in a slow language on a busy grader is given the time it needs, and a
// fixed wait never turns a busy machine into a wrong grade.
type Calibration struct {
	// Start is the median time of `queuectl backoff` (CONTRACT §1): a
	// process that starts, computes one answer and exits, with no file.
	Start time.Duration `json:"start_ns"`
	// Listen is the median time from starting the receiver to its
	// `listening on` line (CONTRACT §5); 0 when it never announced itself.
	Listen time.Duration `json:"listen_ns"`
	// Load is the 1-minute load average per core when it was measured.
	Load    float64       `json:"load_per_core"`
	Cores   int           `json:"cores"`
	Samples int           `json:"samples"` // runs of each measurement
	Took    time.Duration `json:"took_ns"` // the calibration's own cost
	Note    string        `json:"note,omitempty"`
}

// Unit is one "start and answer" of this implementation: the slower of its
// two measurements.
func (c Calibration) Unit() time.Duration { return max(c.Start, c.Listen) }

// String is the calibration in one line, for the console and reports.
func (c Calibration) String() string {
	start, listen := "queuectl was not timed", "the receiver was not timed"
	if c.Start > 0 {
		start = fmt.Sprintf("queuectl starts and answers in %.1fms", ms(c.Start))
	}
	if c.Listen > 0 {
		listen = fmt.Sprintf("the receiver listens after %.1fms", ms(c.Listen))
	}
	s := fmt.Sprintf("%s, %s (medians of %d); load %.2f per core on %d cores", start, listen, c.Samples, c.Load, c.Cores)
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// Limits are the waits of one step. Each is the larger of a floor (the fixed
// value the lab used before calibration, scaled by the machine's load) and a
// number of calibrated starts: a wait for a line, an exit or an answer
// allows 40 of this implementation's starts, a whole step 400.
type Limits struct {
	// Wait bounds every single wait for a line, an exit, a state or an
	// HTTP answer (the harness's WaitLimit).
	Wait time.Duration `json:"wait_ns"`
	// Block is what a step may allow WaitBlocked to see processes asleep
	// on the held write lock.
	Block time.Duration `json:"block_ns"`
	// Drain bounds reading the rest of a process's stdout and stderr once
	// it has ended; output still open then is never judged.
	Drain time.Duration `json:"drain_ns"`
	// Step is the time limit of the whole step.
	Step time.Duration `json:"step_ns"`
	// Scale is the load factor the floors were multiplied by (1 to 10).
	Scale float64 `json:"scale"`
	// Fixed says the step limit was given (--timeout), not derived.
	Fixed bool `json:"fixed,omitempty"`
	// From is the calibration the limits were derived from.
	From Calibration `json:"calibration"`
}

// Floors and factors of the derivation (see Limits).
const (
	minWait, waitStarts   = 10 * time.Second, 40
	minBlock, blockStarts = 3 * time.Second, 10
	minDrain, drainStarts = 5 * time.Second, 20
	minStep, stepStarts   = 60 * time.Second, 400
	maxLoadScale          = 10
)

// MaxStep is the longest step limit a derivation gives a calibration whose
// unit is at most MaxStep/400 (1.5 s): a backstop for a grader that kills a
// step from outside without knowing the limit the step derived.
const MaxStep = minStep * maxLoadScale

// DeriveLimits turns a calibration into one step's limits, scaling the
// floors by the machine's load (the larger of the load at calibration and
// load, the load per core now). stepTimeout > 0 fixes the step limit.
func DeriveLimits(c Calibration, load float64, stepTimeout time.Duration) Limits {
	scale := min(max(1, c.Load, load), maxLoadScale)
	unit := c.Unit()
	derive := func(floor time.Duration, starts int) time.Duration {
		return max(time.Duration(float64(floor)*scale), time.Duration(starts)*unit).Round(time.Millisecond)
	}
	l := Limits{Wait: derive(minWait, waitStarts), Block: derive(minBlock, blockStarts), Drain: derive(minDrain, drainStarts),
		Step: derive(minStep, stepStarts), Scale: scale, From: c}
	if stepTimeout > 0 {
		l.Step, l.Fixed = stepTimeout, true
	}
	return l
}

// String says the limits and where they come from, briefly, for a
// timed-out check.
func (l Limits) String() string {
	how := "derived"
	if l.Fixed {
		how = "given by --timeout"
	}
	return fmt.Sprintf("each wait %v, step limit %v (%s); calibrated: queuectl %.1fms, receiver %.1fms, load %.2f per core (floors ×%.1f)",
		l.Wait, l.Step, how, ms(l.From.Start), ms(l.From.Listen), l.From.Load, l.Scale)
}

// LoadPerCore is the 1-minute load average divided by the cores (0 when
// /proc/loadavg cannot be read).

// ms is d in milliseconds, for messages.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
