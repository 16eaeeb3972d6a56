package harness

import (
	"strconv"
	"strings"

	"snacklab/labsteps/result"
)

// MarkEpoch lets the report show this section's wall-clock instants relative
// to the step's start.
func (h *Harness) MarkEpoch() {
	h.Event(result.LaneHarness, result.KindEpoch, strconv.FormatInt(h.began.UnixMilli(), 10), result.NoClock, false)
}

// Summarize closes the section's timeline with one line saying what the
// story came to.
func (h *Harness) Summarize(text string) {
	h.Event(result.LaneHarness, result.KindSummary, text, result.NoClock, false)
	h.Narrate("outcome: %s", text)
}

// FinishFor runs `queuectl finish` on behalf of a process that can no longer
// run it (A, dead while holding token 1) and draws it in that process's lane:
// it is that process's stale finish arriving late, whoever types it.
func (h *Harness) FinishFor(lane, id string, token int64, outcome string, now int64) Finished {
	f := h.Finish(id, token, outcome, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.events) - 1; i >= 0; i-- {
		e := &h.events[i]
		if e.Lane == result.LaneQueuectl && strings.HasPrefix(e.Text, "finish "+id+" ") {
			e.Lane, e.Text = lane, "late "+e.Text+" (run for "+lane+" by the harness)"
			break
		}
	}
	return f
}
