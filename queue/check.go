package queue

import (
	"context"
	"database/sql"
	"fmt"
)

// Problem is one broken rule found by Check.
type Problem struct {
	Rule   string `json:"rule"`   // short name of the rule, e.g. "lease-iff-leased"
	JobID  string `json:"job_id"` // the job concerned; "" for file-level problems
	Detail string `json:"detail"` // what was found
}

func (p Problem) String() string {
	if p.JobID == "" {
		return p.Rule + ": " + p.Detail
	}
	return p.Rule + ": " + p.JobID + ": " + p.Detail
}

// invariants are CONTRACT.md §2's rules as queries returning (job id,
// detail) for every row that breaks them. The schema's CHECKs already stop
// this package from writing such rows; Check finds what a hand edit, another
// implementation or a damaged disk left behind.
// A rule with a column runs only on a file whose jobs table has it (a
// version 1 to 3 file, read as it is, has no closed_at).
// A rule with a table runs only on a file that has it (version 5 on).
var invariants = []struct{ rule, query, column, table string }{
	{"state", `SELECT id, 'state ' || quote(state) FROM jobs WHERE state NOT IN ('pending','leased','done','dead')`, "", ""},
	{"lease-iff-leased", `SELECT id, state || ' with owner ' || quote(owner) || ' and lease_until ' || quote(lease_until) FROM jobs
		WHERE (state = 'leased') <> (owner IS NOT NULL AND lease_until IS NOT NULL)
		   OR (state <> 'leased' AND (owner IS NOT NULL OR lease_until IS NOT NULL))`, "", ""},
	{"reason-iff-dead", `SELECT id, state || ' with reason ' || quote(reason) FROM jobs
		WHERE (state = 'dead') <> (reason IS NOT NULL) OR (reason IS NOT NULL AND reason NOT IN ('permanent','exhausted','deadline'))`, "", ""},
	{"attempts-within-budget", `SELECT id, 'attempts ' || attempts || ' of max ' || max_attempts FROM jobs
		WHERE attempts < 0 OR attempts > max_attempts OR max_attempts NOT BETWEEN 1 AND 1000`, "", ""},
	{"leased-was-granted", `SELECT id, 'leased with token ' || token || ', attempts ' || attempts FROM jobs
		WHERE state = 'leased' AND (token < 1 OR attempts < 1)`, "", ""},
	{"token-covers-attempts", `SELECT j.id, 'token ' || j.token || ' < attempts ' || j.attempts || ' since the last redrive + its prev_token ' || coalesce(r.prev_token, 0)
		FROM jobs j LEFT JOIN redrives r ON r.seq = (SELECT max(seq) FROM redrives WHERE job_id = j.id)
		WHERE j.token < j.attempts + coalesce(r.prev_token, 0)`, "", ""},
	{"redrive-token-not-ahead", `SELECT r.job_id, 'redrive ' || r.seq || ' prev_token ' || r.prev_token || ' > job token ' || j.token
		FROM redrives r JOIN jobs j ON j.id = r.job_id WHERE r.prev_token > j.token`, "", ""},
	{"pending-before-deadline", `SELECT id, 'pending with available_at ' || available_at || ' >= deadline_at ' || deadline_at FROM jobs
		WHERE state = 'pending' AND available_at >= deadline_at`, "", ""},
	{"closed-iff-done-or-dead", `SELECT id, state || ' with closed_at ' || quote(closed_at) FROM jobs
		WHERE (closed_at IS NULL) <> (state IN ('pending','leased'))`, "closed_at", ""},
	{"qty", `SELECT id, 'qty ' || quote(qty) FROM jobs WHERE qty NOT BETWEEN 1 AND 1000000`, "", ""},
	{"audit-points-at-job", `SELECT job_id, 'redrive ' || seq || ' names no job' FROM redrives WHERE job_id NOT IN (SELECT id FROM jobs)
		UNION ALL SELECT job_id, 'investigation ' || seq || ' names no job' FROM investigations WHERE job_id NOT IN (SELECT id FROM jobs)`, "", ""},
	{"tally-done", `SELECT '', 'the done tally says ' || t.n || ', the jobs ' || (SELECT count(*) FROM jobs WHERE state = 'done')
		FROM tallies t WHERE t.name = 'done' AND t.n <> (SELECT count(*) FROM jobs WHERE state = 'done')`, "", "tallies"},
	{"attempt-points-at-job", `SELECT job_id, 'attempt with token ' || token || ' names no job' FROM attempts WHERE job_id NOT IN (SELECT id FROM jobs)`, "", "attempts"},
}

// Check runs SQLite's integrity check and the contract's invariants and
// returns up to max problems (all when max <= 0) and how many there were in
// all, counting at most max+1 per rule. It only reads.
func (q *Queue) Check(ctx context.Context, max int) (problems []Problem, total int, err error) {
	add := func(p Problem) {
		total++
		if max <= 0 || len(problems) < max {
			problems = append(problems, p)
		}
	}
	limit := ""
	if max > 0 {
		limit = fmt.Sprintf(" LIMIT %d", max+1)
	}
	integrity := "PRAGMA integrity_check"
	if max > 0 {
		integrity += fmt.Sprintf("(%d)", max+1)
	}
	rows, err := q.db.QueryContext(ctx, integrity)
	if err != nil {
		return nil, 0, classify(err)
	}
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			rows.Close()
			return nil, 0, classify(err)
		}
		if msg != "ok" {
			add(Problem{Rule: "integrity", Detail: msg})
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, 0, classify(err)
	}
	if total > 0 {
		// A damaged file's rows cannot be trusted; the invariants would
		// only repeat the damage.
		return problems, total, nil
	}
	for _, inv := range invariants {
		if inv.table != "" {
			var has bool
			if err := q.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?)`,
				inv.table).Scan(&has); err != nil {
				return nil, 0, classify(err)
			}
			if !has {
				continue
			}
		}
		if inv.column != "" {
			var has bool
			if err := q.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('jobs') WHERE name = ?)`,
				inv.column).Scan(&has); err != nil {
				return nil, 0, classify(err)
			}
			if !has {
				continue
			}
		}
		rows, err := q.db.QueryContext(ctx, "SELECT * FROM ("+inv.query+")"+limit)
		if err != nil {
			return nil, 0, fmt.Errorf("check %s: %w", inv.rule, classify(err))
		}
		for rows.Next() {
			var id, detail sql.NullString // a broken row may hold NULL anywhere
			if err := rows.Scan(&id, &detail); err != nil {
				rows.Close()
				return nil, 0, classify(err)
			}
			if !detail.Valid {
				detail.String = "a NULL where the schema forbids one"
			}
			add(Problem{Rule: inv.rule, JobID: id.String, Detail: detail.String})
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, 0, classify(err)
		}
	}
	return problems, total, nil
}
