package labsteps

import (
	"strconv"
	"strings"
)

// Kinds of timeline events the report draws specially (see timelineSVG).
const (
	// kindSummary is a section's closing line: what the story came to.
	kindSummary = "summary"
	// kindEpoch carries the step's start on the wall clock in ms. It is not
	// drawn: the report uses it to show real-clock instants printed by the
	// processes (lease_until 1796079085156) relative to the step's start, on
	// the same scale as the real-time column.
	kindEpoch = "epoch"
)

// markEpoch lets the report show this section's wall-clock instants relative
// to the step's start.
func (h *Harness) markEpoch() {
	h.Event(LaneHarness, kindEpoch, strconv.FormatInt(h.began.UnixMilli(), 10), noClock, false)
}

// summarize closes the section's timeline with one line saying what the
// story came to.
func (h *Harness) summarize(text string) {
	h.Event(LaneHarness, kindSummary, text, noClock, false)
	h.Narrate("outcome: %s", text)
}

// finishFor runs `queuectl finish` on behalf of a process that can no longer
// run it (A, dead while holding token 1) and draws it in that process's lane:
// it is that process's stale finish arriving late, whoever types it.
func (h *Harness) finishFor(lane, id string, token int64, outcome string, now int64) Finished {
	f := h.Finish(id, token, outcome, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.events) - 1; i >= 0; i-- {
		e := &h.events[i]
		if e.Lane == LaneQueuectl && strings.HasPrefix(e.Text, "finish "+id+" ") {
			e.Lane, e.Text = lane, "late "+e.Text+" (run for "+lane+" by the harness)"
			break
		}
	}
	return f
}
