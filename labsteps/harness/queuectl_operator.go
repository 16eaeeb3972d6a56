package harness

import (
	"fmt"

	"snacklab/labsteps/result"
)

// Redrive is the REDRIVE object of CONTRACT §3.
type Redrive struct {
	JobID      string `json:"job_id"`
	PrevToken  int64  `json:"prev_token"`
	PrevReason string `json:"prev_reason"`
	AtMs       int64  `json:"at_ms"`
	Note       string `json:"note"`
}

// Redriven is the answer to `queuectl redrive`.
type Redriven struct {
	Run     *Run    `json:"-"`
	Job     Job     `json:"job"`
	Redrive Redrive `json:"redrive"`
}

// Redrive asks to send a dead job back with a note.
func (h *Harness) Redrive(id, note string, now int64) Redriven {
	r := h.Queuectl("redrive", now, "--id", id, "--note="+note)
	d := Redriven{Run: r}
	if r.Code == 0 {
		h.Parse(r, &d)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("redrive %s → %s", id, r.Exit()), now, r.Code != 0)
	return d
}

// Shown is the answer to `queuectl show`.
type Shown struct {
	Run            *Run            `json:"-"`
	Job            Job             `json:"job"`
	Redrives       []Redrive       `json:"redrives"`
	Investigations []Investigation `json:"investigations"`
	// Attempts is the evidence of each attempt (CONTRACT §3 finish
	// evidence); nil when the implementation prints no "attempts" key.
	Attempts *[]Attempt `json:"attempts"`
}

// Attempt is one attempt's evidence as `queuectl show` prints it.
type Attempt struct {
	Token   int64   `json:"token"`
	Attempt int64   `json:"attempt"`
	Outcome string  `json:"outcome"`
	Status  *int64  `json:"status"`
	Error   *string `json:"error"`
	AtMs    int64   `json:"at_ms"`
}

// String is the attempt as a check compares it: "#2 retry 503 http at 10010".
func (a Attempt) String() string {
	return fmt.Sprintf("#%d token %d %s %s %s at %d", a.Attempt, a.Token, a.Outcome, Repr(a.Status), Repr(a.Error), a.AtMs)
}

// Show reads a job and its history with a fresh process.
func (h *Harness) Show(id string) Shown {
	r := h.Queuectl("show", -1, "--id", id)
	s := Shown{Run: r}
	if r.Code == 0 {
		h.Parse(r, &s)
	}
	return s
}

// MustShow reads a job that must exist.
func (h *Harness) MustShow(id string) Shown {
	s := h.Show(id)
	h.ExpectFound(id, s.Run)
	return s
}

// ExpectFound checks that `queuectl show --id ID` found the job.
func (h *Harness) ExpectFound(id string, r *Run) {
	h.ExpectExit("`queuectl show --id "+id+"` finds the job", 0, r,
		"no path may delete a job: its id and qty are the evidence of what happened to the order")
}

// ShowAll reads several jobs at once with fresh processes.
func (h *Harness) ShowAll(ids ...string) map[string]Shown {
	cmds := make([][]string, len(ids))
	for i, id := range ids {
		cmds[i] = append([]string{"queuectl"}, h.QueuectlArgs("show", -1, "--id", id)...)
	}
	out := map[string]Shown{}
	for i, r := range h.ExecAll(cmds) {
		s := Shown{Run: r}
		h.ExpectFound(ids[i], r)
		h.Parse(r, &s)
		out[ids[i]] = s
	}
	return out
}

// Investigated is the answer to `queuectl investigate`.
type Investigated struct {
	Run           *Run          `json:"-"`
	Investigation Investigation `json:"investigation"`
}

// Investigation is an investigations row of CONTRACT §2, as show and
// investigate print it.
type Investigation struct {
	JobID string `json:"job_id"`
	AtMs  int64  `json:"at_ms"`
	Note  string `json:"note"`
}

// Investigate records that someone looked at id, under a ticket note.
func (h *Harness) Investigate(id, note string, now int64) Investigated {
	r := h.Queuectl("investigate", now, "--id", id, "--note="+note)
	v := Investigated{Run: r}
	if r.Code == 0 {
		h.Parse(r, &v)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("investigate %s → %s", id, r.Exit()), now, r.Code != 0)
	return v
}
