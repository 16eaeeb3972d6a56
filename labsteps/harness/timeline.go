package harness

import (
	"fmt"

	"snacklab/labsteps/result"
)

// Section starts a named variant of the step (for example "a: exit 73"); the
// timeline groups events by it.
func (h *Harness) Section(name string) {
	h.mu.Lock()
	h.section = name
	h.mu.Unlock()
	h.Narrate("── %s", name)
}

// Narrate adds a line to the step's story, bounded: one entry at
// MaxCheckText, the story at MaxNarrative (what follows is dropped, said
// once), so a program's flood of output cannot grow the judge through it.
func (h *Harness) Narrate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.narr.Len() >= MaxNarrative {
		return
	}
	fmt.Fprintf(&h.narr, "[%7.1fms] %s\n", ms(h.since()), bound(fmt.Sprintf(format, args...), MaxCheckText))
	if h.narr.Len() >= MaxNarrative {
		fmt.Fprintf(&h.narr, "[%7.1fms] (the story is cut at %d bytes: the rest is in the logs)\n", ms(h.since()), MaxNarrative)
	}
}

// Event records a point on the timeline.
func (h *Harness) Event(lane, kind, text string, clock int64, bad bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, result.Event{At: h.since(), Lane: lane, Kind: kind, Text: text,
		Clock: clock, Section: h.section, Bad: bad})
}

// Action records something the harness itself did, on the timeline and in the story.
func (h *Harness) Action(text string, clock int64) {
	h.Event(result.LaneHarness, "action", text, clock, false)
	h.Narrate("harness: %s", text)
}
