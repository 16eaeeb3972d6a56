package result

import "time"

// Event is one point on a step's timeline: a process start or exit, a line a
// process printed, or an action of the harness.
type Event struct {
	At      time.Duration `json:"at_ns"`   // real time since the step started
	Lane    string        `json:"lane"`    // A, B, receiver, queuectl, harness
	Kind    string        `json:"kind"`    // start, exit, kill, line, action, check, summary, epoch
	Text    string        `json:"text"`    // one readable line
	Clock   int64         `json:"clock"`   // the injected clock (ms) this event ran under; NoClock when none
	Section string        `json:"section"` // the variant of the step it belongs to
	Bad     bool          `json:"bad"`     // an exit, kill or refusal worth highlighting
}

// NoClock marks an event that did not run under the injected clock.
const NoClock = -1

// Lanes of the timeline besides the senders' (A, B, …).
const (
	LaneHarness  = "harness"
	LaneQueuectl = "queuectl"
	LaneReceiver = "receiver"
)

// Kinds of timeline events the report draws specially.
const (
	// KindSummary is a section's closing line: what the story came to.
	KindSummary = "summary"
	// KindEpoch carries the step's start on the wall clock in ms. It is not
	// drawn: the report uses it to show real-clock instants printed by the
	// processes (lease_until 1796079085156) relative to the step's start, on
	// the same scale as the real-time column.
	KindEpoch = "epoch"
)
