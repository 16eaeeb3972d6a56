package harness

import (
	"fmt"
	"strconv"

	"snacklab/labsteps/result"
)

// Enqueued is the answer to `queuectl enqueue`.
type Enqueued struct {
	Run       *Run `json:"-"`
	Job       Job  `json:"job"`
	Duplicate bool `json:"duplicate"`
}

// Enqueue accepts an order at now. extra are more flags, such as
// "--max-attempts", "2".
func (h *Harness) Enqueue(id string, qty, now int64, extra ...string) Enqueued {
	r := h.Queuectl("enqueue", now, append([]string{"--id", id, "--qty", strconv.FormatInt(qty, 10)}, extra...)...)
	e := Enqueued{Run: r}
	if r.Code == 0 {
		h.Parse(r, &e)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("enqueue %s qty %d → %s", id, qty, r.Exit()), now, r.Code != 0)
	return e
}

// MustEnqueue enqueues and fails the step unless it was accepted.
func (h *Harness) MustEnqueue(id string, qty, now int64, extra ...string) Job {
	e := h.Enqueue(id, qty, now, extra...)
	h.mustSucceed(e.Run, "the step needs this order in the queue")
	return e.Job
}

// Claimed is the answer to `queuectl claim`.
type Claimed struct {
	Run     *Run `json:"-"`
	Claimed bool `json:"claimed"`
	Job     Job  `json:"job"`
}

// Claim asks for one due job as owner at now, for leaseMs.
func (h *Harness) Claim(owner string, now, leaseMs int64) Claimed {
	r := h.Queuectl("claim", now, "--owner", owner, "--lease-ms", strconv.FormatInt(leaseMs, 10))
	c := Claimed{Run: r}
	if r.Code == 0 || r.Code == 13 {
		h.Parse(r, &c)
	}
	text := fmt.Sprintf("claim by %s → nothing (%s)", owner, r.Exit())
	if c.Claimed {
		text = fmt.Sprintf("claim by %s → %s token %d, lease_until %s", owner, c.Job.ID, c.Job.Token, Repr(c.Job.LeaseUntil))
	}
	h.Event(result.LaneQueuectl, "action", text, now, false)
	return c
}

// ClaimAll claims n due jobs at now, one claim each, and fails the step unless
// every claim got a job and no job came twice. It returns the jobs by id.
func (h *Harness) ClaimAll(owner string, n int, now, leaseMs int64) map[string]Job {
	held := map[string]Job{}
	for range n {
		c := h.Claim(owner, now, leaseMs)
		h.ExpectExit(fmt.Sprintf("claim at %d while jobs are due", now), 0, c.Run,
			fmt.Sprintf("%d jobs are due and none is leased", n))
		held[c.Job.ID] = c.Job
	}
	h.Equal(fmt.Sprintf("%d claims got %d different jobs", n, n), n, len(held),
		"one claim hands out one job; a job already leased is not handed out again")
	return held
}

// Finished is the answer to `queuectl finish`.
type Finished struct {
	Run     *Run `json:"-"`
	Applied bool `json:"applied"`
	Job     *Job `json:"job"`
}

// Finish reports an outcome for id under token at now.
func (h *Harness) Finish(id string, token int64, outcome string, now int64) Finished {
	r := h.Queuectl("finish", now, "--id", id, "--token", strconv.FormatInt(token, 10), "--outcome", outcome)
	f := Finished{Run: r}
	if r.Code == 0 || r.Code == 12 {
		h.Parse(r, &f)
	}
	text := fmt.Sprintf("finish %s token %d %s → ", id, token, outcome)
	if f.Applied && f.Job != nil {
		text += "applied, " + f.Job.State
	} else {
		text += "not applied (" + r.Exit() + ")"
	}
	h.Event(result.LaneQueuectl, "action", text, now, !f.Applied)
	return f
}

// BackoffCase is one question to `queuectl backoff`.
type BackoffCase struct {
	ID      string
	Attempt int
}

// BackoffAnswer is `queuectl backoff --json`'s answer (CONTRACT §3).
type BackoffAnswer struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	DelayMs int64  `json:"delay_ms"`
}

// Backoffs asks `queuectl backoff --json` about each case, all at once, and
// returns the answers in the cases' order.
func (h *Harness) Backoffs(cases []BackoffCase) []BackoffAnswer {
	cmds := make([][]string, len(cases))
	for i, c := range cases {
		cmds[i] = []string{"queuectl", "backoff", "--json", "--id", c.ID, "--attempt", strconv.Itoa(c.Attempt)}
	}
	runs := h.ExecAll(cmds)
	out := make([]BackoffAnswer, len(cases))
	for i, r := range runs {
		h.mustSucceed(r, "the backoff is part of the contract so that a grader, or a learner with a pencil, can predict every retry")
		h.Parse(r, &out[i])
	}
	return out
}

// MustFinish reports an outcome that must be applied and returns the job after it.
func (h *Harness) MustFinish(id string, token int64, outcome string, now int64) *Job {
	f := h.Finish(id, token, outcome, now)
	what := fmt.Sprintf("finish %s with token %d (%s) is applied", id, token, outcome)
	why := "this token is the job's current lease, so its outcome must be recorded"
	h.ExpectExit(what, 0, f.Run, why)
	h.Check(what, f.Applied && f.Job != nil, `{"applied":true,"job":{…}}`, Trim(f.Run.Stdout), why)
	return f.Job
}

// ExpectNotApplied checks that a finish was refused (exit 12, applied false)
// and that the job is exactly as it was.
func (h *Harness) ExpectNotApplied(what string, f Finished, before Job, why string) {
	h.ExpectExit(what+": exit code", 12, f.Run, why)
	h.Equal(what+": applied", false, f.Applied, why)
	after := h.MustShow(before.ID).Job
	h.Equal(what+": the job is unchanged", before.Canon, after.Canon, why)
}
