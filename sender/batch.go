package sender

import (
	"context"
	"fmt"

	"snacklab/queue"
)

// RunBatch is RunOnce for up to s.Batch jobs (CONTRACT.md §4.batch): one
// claim transaction grants them, each under its own token and lease; they
// are delivered one after another, in the order granted; one transaction
// finishes every job that reached a decision, each judged by its own token.
// Nothing claimable is no results and no error.
//
// Delivery is sequential on purpose: the receiver commits each order on its
// own (so parallel POSTs would queue behind its write lock), the events
// come in the order of the claim, and a sender killed mid-batch has
// delivered a prefix of it. The cost is latency: the last job of a batch
// waits for the deliveries before it, so s.Batch × the POST timeout should
// stay under the lease, or the lease of the last jobs may run out and another
// sender deliver them again (the receiver's idempotence absorbs the second
// POST; the late finish is then not applied).
//
// A job that cannot be decided (BadAck, unexpected) stays leased and the
// batch goes on; a finish not applied reports `applied` false. Either way the
// batch's other jobs are finished first and RunBatch then returns the first
// such error in the batch's order (ErrBadAck, ErrUnexpected or ErrStale), as
// RunOnce would for that job.
func (s *Sender) RunBatch(ctx context.Context) ([]Result, error) {
	// BEGIN SOLUTION run-batch: emit claiming, claim up to Batch jobs in one transaction, emit claimed for each, POST each in order and emit response, classify, finish the decided ones in one transaction and emit finished for each (CONTRACT.md §4.batch)
	if err := s.emit(Event{Kind: "claiming", Owner: s.Owner}); err != nil {
		return nil, err
	}
	jobs, err := s.Queue.ClaimBatch(ctx, s.Owner, s.now(), s.LeaseMs, max(1, s.Batch))
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, s.emit(Event{Kind: "empty"})
	}
	res := make([]Result, len(jobs))
	for i, job := range jobs {
		res[i] = Result{Claimed: true, Job: job}
		if err := s.emit(Event{Kind: "claimed", ID: job.ID, Qty: job.Qty, Token: job.Token,
			Attempt: job.Attempts, LeaseUntil: job.LeaseUntil}); err != nil {
			return res, err
		}
	}
	ctx = context.WithoutCancel(ctx)
	outcomes := map[Class]queue.Outcome{ClassOK: queue.OutcomeOK, ClassRetryable: queue.OutcomeRetry, ClassPermanent: queue.OutcomePermanent}
	errs := make([]error, len(jobs))
	var fs []queue.Finishing
	var decided []int // index in jobs of each fs
	for i, job := range jobs {
		status, body, postErr := s.post(ctx, job)
		res[i].Status = status
		res[i].Ack, _ = Ack(body)
		var terr string
		if status == 0 && postErr != nil {
			terr = TransportError(postErr)
		}
		if err := s.emit(Event{Kind: "response", ID: job.ID, Token: job.Token, Status: status, Ack: res[i].Ack, Error: terr}); err != nil {
			return res, err
		}
		if s.ExitAfterReceipt != nil {
			s.ExitAfterReceipt()
			return res[:i+1], fmt.Errorf("%s token %d: %w", job.ID, job.Token, ErrStoppedAfterReceipt)
		}
		cerr := Classify(status, body, postErr)
		res[i].Class = ClassOf(cerr)
		ev := EvidenceOf(status, postErr, res[i].Class)
		outcome, ok := outcomes[res[i].Class]
		if !ok { // no decision, but the evidence is kept: the job stays leased
			errs[i] = fmt.Errorf("deliver %s token %d: %w (job left leased)", job.ID, job.Token, cerr)
			if _, err := s.Queue.NoteAttempt(ctx, job.ID, job.Token, ev, s.now()); err != nil {
				errs[i] = fmt.Errorf("%w; its evidence not kept: %v", errs[i], err)
			}
			continue
		}
		fs = append(fs, queue.Finishing{ID: job.ID, Token: job.Token, Outcome: outcome, Evidence: ev})
		decided = append(decided, i)
	}
	if len(fs) > 0 {
		out, err := s.Queue.FinishBatch(ctx, fs, s.now())
		if err != nil {
			return res, err
		}
		for k, i := range decided {
			job, after := jobs[i], out[k].Job
			res[i].Applied, res[i].After = out[k].Applied, after
			if err := s.emit(Event{Kind: "finished", ID: job.ID, Token: job.Token, Class: res[i].Class,
				Applied: out[k].Applied, State: after.State, Reason: after.Reason}); err != nil {
				return res, err
			}
			if !out[k].Applied {
				errs[i] = fmt.Errorf("finish %s token %d: %w (job is %s, token %d)", job.ID, job.Token, ErrStale, after.State, after.Token)
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, nil
	// END SOLUTION run-batch
	// STARTER: return nil, fmt.Errorf("%w (sender/batch.go: RunBatch)", queue.ErrNotImplemented)
}

// runBatches is Run with s.Batch > 1: batches until nothing is claimable,
// ctx is done, or a batch ends in an error.
func (s *Sender) runBatches(ctx context.Context) (int, error) {
	n := 0
	for ctx.Err() == nil {
		res, err := s.RunBatch(ctx)
		n += len(res)
		if err != nil {
			if len(res) == 0 && ctx.Err() != nil {
				return n, nil // stopped while waiting to claim: nothing was taken
			}
			return n, err
		}
		if len(res) == 0 {
			return n, nil
		}
	}
	return n, nil
}
