package labsteps

import (
	"fmt"
	"time"
)

// Event is one point on a step's timeline: a process start or exit, a line a
// process printed, or an action of the harness.
type Event struct {
	At      time.Duration `json:"at_ns"`   // real time since the step started
	Lane    string        `json:"lane"`    // A, B, receiver, queuectl, harness
	Kind    string        `json:"kind"`    // start, exit, kill, line, action, check
	Text    string        `json:"text"`    // one readable line
	Clock   int64         `json:"clock"`   // the injected clock (ms) this event ran under; -1 when none
	Section string        `json:"section"` // the variant of the step it belongs to
	Bad     bool          `json:"bad"`     // an exit, kill or refusal worth highlighting
}

// noClock marks an event that did not run under the injected clock.
const noClock = -1

// Lanes of the timeline.
const (
	LaneHarness  = "harness"
	LaneQueuectl = "queuectl"
	LaneReceiver = "receiver"
)

// Section starts a named variant of the step (for example "a: exit 73"); the
// timeline groups events by it.
func (h *Harness) Section(name string) {
	h.mu.Lock()
	h.section = name
	h.mu.Unlock()
	h.Narrate("── %s", name)
}

// Narrate adds a line to the step's story.
func (h *Harness) Narrate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(&h.narr, "[%7.1fms] %s\n", ms(h.since()), fmt.Sprintf(format, args...))
}

// Event records a point on the timeline.
func (h *Harness) Event(lane, kind, text string, clock int64, bad bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, Event{At: h.since(), Lane: lane, Kind: kind, Text: text,
		Clock: clock, Section: h.section, Bad: bad})
}

// Action records something the harness itself did, on the timeline and in the story.
func (h *Harness) Action(text string, clock int64) {
	h.Event(LaneHarness, "action", text, clock, false)
	h.Narrate("harness: %s", text)
}
