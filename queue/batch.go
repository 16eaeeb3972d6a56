package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
)

// MaxBatch bounds how many jobs one ClaimBatch grants and one FinishBatch
// finishes: a batch is one transaction holding the write lock, and every
// other writer waits for it.
const MaxBatch = 1000

// ClaimBatch is Claim for up to n jobs in one immediate transaction: the
// sweep of spent leases once, then up to n grants, each exactly Claim's
// grant (the first claimable job by available_at then id, attempts+1,
// token+1, its own lease until now+leaseMs). One commit for n grants is the
// point: a claim costs a commit, whatever it grants. It returns the jobs in
// the order granted, none when nothing is claimable (the sweep is committed
// all the same). n = 1 is Claim.
func (q *Queue) ClaimBatch(ctx context.Context, owner string, now, leaseMs int64, n int) (jobs []Job, err error) {
	if err := firstErr(CheckID("owner", owner), checkRange("lease ms", leaseMs, 1, MaxLease),
		checkRange("now ms", now, 0, 1<<62), checkRange("batch", int64(n), 1, MaxBatch)); err != nil {
		return nil, err
	}
	// BEGIN SOLUTION claim-batch: Claim's sweep once, then Claim's grant up to n times, in one immediate transaction (CONTRACT.md §4.batch)
	// The statements are Claim's, text for text, so they share its
	// prepared statements and cannot drift from it unnoticed
	// (TestClaimBatchOfOneIsClaim).
	look := q.stmt(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
		    WHERE closed_at IS NULL AND deadline_at <= ?1 AND (state = 'pending' OR lease_until <= ?1))
		OR EXISTS (SELECT 1 FROM jobs
		    WHERE closed_at IS NULL AND attempts >= max_attempts AND lease_until <= ?1)`)
	sweep := q.stmt(ctx, `UPDATE jobs SET state = 'dead',
			reason = CASE WHEN state = 'leased' AND attempts >= max_attempts THEN 'exhausted' ELSE 'deadline' END,
			owner = NULL, lease_until = NULL, updated_at = ?1, closed_at = ?1
			WHERE id IN (SELECT id FROM jobs WHERE closed_at IS NULL AND deadline_at <= ?1
			                 AND (state = 'pending' OR lease_until <= ?1)
			             UNION ALL
			             SELECT id FROM jobs WHERE closed_at IS NULL AND attempts >= max_attempts
			                 AND lease_until <= ?1)`)
	expired := q.stmt(ctx, `INSERT OR IGNORE INTO attempts (job_id, token, attempt, outcome, error, at_ms)
			SELECT id, token, attempts, 'expired', 'lease', ?1 FROM jobs
			WHERE id IN (SELECT id FROM jobs WHERE closed_at IS NULL AND deadline_at <= ?1 AND lease_until <= ?1
			             UNION ALL
			             SELECT id FROM jobs WHERE closed_at IS NULL AND attempts >= max_attempts
			                 AND lease_until <= ?1)`)
	// A granted job's lease runs past now, so the next grant steps over it.
	grant := q.stmt(ctx, `UPDATE jobs SET state = 'leased',
		owner = ?2, lease_until = ?1 + ?3, attempts = attempts + 1, token = token + 1, updated_at = ?1
		WHERE id = (SELECT id FROM jobs
		            WHERE closed_at IS NULL AND available_at <= ?1 AND (state = 'pending' OR lease_until <= ?1)
		            ORDER BY available_at, id LIMIT 1)
		RETURNING `+jobCols)
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", classify(err))
	}
	defer tx.Rollback()
	var spent bool
	if err := inTx(ctx, tx, look).QueryRowContext(ctx, now).Scan(&spent); err != nil {
		return nil, fmt.Errorf("claim batch: look for spent jobs: %w", classify(err))
	}
	if spent {
		if _, err := inTx(ctx, tx, expired).ExecContext(ctx, now); err != nil {
			return nil, fmt.Errorf("claim batch: evidence of spent leases: %w", classify(err))
		}
		if _, err := inTx(ctx, tx, sweep).ExecContext(ctx, now); err != nil {
			return nil, fmt.Errorf("claim batch: quarantine spent jobs: %w", classify(err))
		}
	}
	g := inTx(ctx, tx, grant)
	for len(jobs) < n {
		job, err := scanJob(g.QueryRowContext(ctx, now, owner, leaseMs))
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("claim batch: grant %d: %w", len(jobs)+1, classify(err))
		}
		jobs = append(jobs, job)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim batch: commit: %w", classify(err))
	}
	return jobs, nil
	// END SOLUTION claim-batch
	// STARTER: return nil, fmt.Errorf("claim batch: %w (queue/batch.go: ClaimBatch)", ErrNotImplemented)
}

// Finishing is one job's outcome handed to FinishBatch: the grant it
// finishes (id and token), what the delivery came to, and what the
// transport adapter saw of it (kept with the attempt, as Finish keeps it).
type Finishing struct {
	ID       string
	Token    int64
	Outcome  Outcome
	Evidence Evidence
}

// Finished is what became of one Finishing: the job after the batch (zero
// if the id is unknown) and whether this finish was applied.
type Finished struct {
	Job     Job
	Applied bool
}

// FinishBatch is Finish for many jobs in one immediate transaction. Each
// finish is judged on its own, exactly as Finish judges it: applied only
// while its job is leased under exactly its token, otherwise not applied
// with nothing written for that job, whatever the others come to. The
// results are in the order of fs. A value Finish would refuse (an invalid
// id, token or outcome) refuses the whole batch before anything is written;
// an error from the database rolls the whole batch back.
func (q *Queue) FinishBatch(ctx context.Context, fs []Finishing, now int64) (out []Finished, err error) {
	if err := checkRange("batch", int64(len(fs)), 1, MaxBatch); err != nil {
		return nil, err
	}
	for _, f := range fs {
		if _, err := ParseOutcome(string(f.Outcome)); err != nil {
			return nil, err
		}
		if err := firstErr(CheckID("id", f.ID), checkRange("token", f.Token, 0, math.MaxInt64),
			checkRange("now ms", now, 0, 1<<62), f.Evidence.Check()); err != nil {
			return nil, err
		}
	}
	// BEGIN SOLUTION finish-batch: in one immediate transaction, for each job Finish's rule under its own token: read it, decide, guarded update (CONTRACT.md §4.batch)
	// Finish's steps for every outcome: read, check state and token, the
	// attempt's row, then the update guarded by state and token. For ok and
	// permanent the update sets available_at to the value it had, so the row
	// ends as Finish's own statement leaves it.
	read := q.stmt(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`)
	record := q.stmt(ctx, insertAttempt)
	update := q.stmt(ctx, `UPDATE jobs SET state = ?3, reason = nullif(?4, ''),
		available_at = ?5, owner = NULL, lease_until = NULL, updated_at = ?6,
		closed_at = CASE WHEN ?3 = 'pending' THEN NULL ELSE ?6 END
		WHERE id = ?1 AND state = 'leased' AND token = ?2
		RETURNING `+jobCols)
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("finish batch: %w", classify(err))
	}
	defer tx.Rollback()
	// Finish's rule for a job leased under the token.
	decide := func(job Job, outcome Outcome) (State, Reason, int64) {
		switch outcome {
		case OutcomePermanent:
			return Dead, ReasonPermanent, job.AvailableAt
		case OutcomeRetry:
			next := now + Backoff(job.ID, int(job.Attempts))
			switch {
			case job.Attempts >= job.MaxAttempts:
				return Dead, ReasonExhausted, job.AvailableAt
			case next >= job.DeadlineAt:
				return Dead, ReasonDeadline, job.AvailableAt
			}
			return Pending, "", next
		}
		return Done, "", job.AvailableAt
	}
	rd, rec, up := inTx(ctx, tx, read), inTx(ctx, tx, record), inTx(ctx, tx, update)
	out = make([]Finished, len(fs))
	for i, f := range fs {
		job, err := scanJob(rd.QueryRowContext(ctx, f.ID))
		if errors.Is(err, sql.ErrNoRows) {
			continue // unknown id: not applied, zero job
		}
		if err != nil {
			return nil, fmt.Errorf("finish batch %s: %w", f.ID, classify(err))
		}
		if job.State != Leased || job.Token != f.Token {
			out[i] = Finished{Job: job}
			continue
		}
		if _, err := rec.ExecContext(ctx, f.ID, f.Token, f.Outcome, f.Evidence.Status, string(f.Evidence.Error), now); err != nil {
			return nil, fmt.Errorf("finish batch %s: evidence: %w", f.ID, classify(err))
		}
		state, reason, availableAt := decide(job, f.Outcome)
		job, err = scanJob(up.QueryRowContext(ctx, f.ID, f.Token, state, reason, availableAt, now))
		if err != nil {
			return nil, fmt.Errorf("finish batch %s: %w", f.ID, classify(err))
		}
		out[i] = Finished{Job: job, Applied: true}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("finish batch: commit: %w", classify(err))
	}
	return out, nil
	// END SOLUTION finish-batch
	// STARTER: return nil, fmt.Errorf("finish batch: %w (queue/batch.go: FinishBatch)", ErrNotImplemented)
}
