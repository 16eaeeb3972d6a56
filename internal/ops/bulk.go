package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"snacklab/queue"
)

// Step is one job handled by a bulk redrive.
type Step struct {
	N      int    // 1-based position among the candidates
	Total  int    // candidates
	ID     string // job id
	Action string // "redriven", "skipped" or "would redrive"
	Detail string // what it was, or why it was skipped
}

// Progress is told about each job as it happens. Bar and Lines are the two
// renderings; nil shows nothing.
type Progress interface {
	Step(Step)
	End(BulkResult)
}

// BulkRedrive redrives the dead jobs of one reason, oldest first, one job per
// transaction through queue.Redrive (so each gets its own audit row), no
// faster than Pace allows. Cancelling the context stops it between jobs: a
// job is either redriven with its audit row or untouched, never half done.
type BulkRedrive struct {
	Reason queue.Reason
	Note   string
	Limit  int  // at most this many candidates, oldest first; 0 means all
	DryRun bool // list the candidates, change nothing
	// Pace is waited on before each redrive. Required unless DryRun.
	Pace Waiter
	// NowMs is the clock of each audit row (at_ms); nil means the wall clock.
	NowMs    func() int64
	Progress Progress
}

// Skip is a candidate left alone, because someone else redrove it (or it
// changed) since the list was read. Re-running a bulk redrive relies on this.
type Skip struct {
	ID     string       `json:"id"`
	State  queue.State  `json:"state"`
	Reason queue.Reason `json:"reason,omitempty"`
}

// BulkResult is what a bulk redrive did, complete even when interrupted.
type BulkResult struct {
	Reason       queue.Reason `json:"reason"`
	Note         string       `json:"note"`
	DryRun       bool         `json:"dry_run"`
	Candidates   int          `json:"candidates"`
	Redriven     []string     `json:"redriven"`
	WouldRedrive []string     `json:"would_redrive,omitempty"`
	Skipped      []Skip       `json:"skipped"`
	NotAttempted int          `json:"not_attempted"` // candidates left when it stopped
	Interrupted  bool         `json:"interrupted"`
}

// Run does the bulk redrive. It returns what was done even with an error.
func (b BulkRedrive) Run(ctx context.Context, q *queue.Queue) (BulkResult, error) {
	res := BulkResult{Reason: b.Reason, Note: b.Note, DryRun: b.DryRun, Redriven: []string{}, Skipped: []Skip{}}
	if err := b.validate(); err != nil {
		return res, err
	}
	nowMs := b.NowMs
	if nowMs == nil {
		nowMs = func() int64 { return time.Now().UnixMilli() }
	}
	// Each job's own work runs to its end even after Ctrl-C; only the wait
	// between jobs is interrupted. So "interrupted" always means "between jobs".
	work := context.WithoutCancel(ctx)
	jobs, err := q.ListDead(work, b.Reason, queue.AllDead)
	if err != nil {
		return res, err
	}
	if b.Limit > 0 && len(jobs) > b.Limit {
		jobs = jobs[:b.Limit]
	}
	res.Candidates = len(jobs)
	step := func(s Step) {
		if b.Progress != nil {
			s.Total = res.Candidates
			b.Progress.Step(s)
		}
	}
	defer func() {
		if b.Progress != nil {
			b.Progress.End(res)
		}
	}()
	if b.DryRun {
		res.WouldRedrive = []string{}
		for i, j := range jobs {
			res.WouldRedrive = append(res.WouldRedrive, j.ID)
			step(Step{N: i + 1, ID: j.ID, Action: "would redrive", Detail: fmt.Sprintf("%s, token %d", j.Reason, j.Token)})
		}
		return res, nil
	}
	for i, j := range jobs {
		if ctx.Err() != nil {
			res.Interrupted, res.NotAttempted = true, len(jobs)-i
			return res, nil
		}
		s, gaveUp, err := b.redrive(ctx, work, q, j.ID, nowMs, &res)
		switch {
		case gaveUp:
			res.Interrupted, res.NotAttempted = true, len(jobs)-i
			return res, nil
		case err != nil:
			res.NotAttempted = len(jobs) - i
			return res, err
		}
		s.N = i + 1
		step(s)
	}
	return res, nil
}

// validate refuses a bulk redrive that is not well formed, before anything
// is read.
func (b BulkRedrive) validate() error {
	if _, err := queue.ParseReason(string(b.Reason)); err != nil {
		return err
	}
	if err := queue.CheckNote(b.Note); err != nil {
		return err
	}
	if b.Limit < 0 {
		return fmt.Errorf("%w: limit %d: want >= 0 (0 means all)", queue.ErrInvalid, b.Limit)
	}
	if b.Pace == nil && !b.DryRun {
		return errors.New("bulk redrive: no pace given")
	}
	return nil
}

// redrive is one candidate's turn: skipped when it is no longer dead for
// b.Reason, else redriven once the pace allows, in its own transaction
// (work is not cancelled). It adds the job to res's Redriven or Skipped and
// returns the step to show, without its position. gaveUp says the operator
// cancelled ctx during the wait, before the job was touched.
func (b BulkRedrive) redrive(ctx, work context.Context, q *queue.Queue, id string, nowMs func() int64, res *BulkResult) (s Step, gaveUp bool, err error) {
	// Skip what is no longer dead (or no longer dead for this reason)
	// before spending a token on it.
	cur, err := q.Get(work, id)
	if err != nil {
		return Step{}, false, err
	}
	if cur.State != queue.Dead || cur.Reason != b.Reason {
		res.Skipped = append(res.Skipped, Skip{ID: id, State: cur.State, Reason: cur.Reason})
		return Step{ID: id, Action: "skipped", Detail: "now " + describe(cur.State, cur.Reason)}, false, nil
	}
	if err := b.Pace.Wait(ctx); err != nil {
		return Step{}, ctx.Err() != nil, err
	}
	// Someone may have redriven it during the wait: queue.Redrive refuses
	// a job that is not dead, writing nothing, and that is a skip.
	job, rd, err := q.Redrive(work, id, b.Note, nowMs())
	switch {
	case errors.Is(err, queue.ErrRedrivePending), errors.Is(err, queue.ErrRedriveLeased), errors.Is(err, queue.ErrRedriveDone):
		res.Skipped = append(res.Skipped, Skip{ID: id, State: job.State})
		return Step{ID: id, Action: "skipped", Detail: "now " + describe(job.State, "")}, false, nil
	case err != nil:
		return Step{}, false, err
	}
	res.Redriven = append(res.Redriven, id)
	return Step{ID: id, Action: "redriven", Detail: fmt.Sprintf("was %s, token stays %d", rd.PrevReason, job.Token)}, false, nil
}

func describe(st queue.State, reason queue.Reason) string {
	if reason != "" {
		return string(st) + " (" + string(reason) + ")"
	}
	return string(st)
}
