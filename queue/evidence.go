package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrorClass names why an attempt failed, from a closed set: short,
// bounded and non-personal, so evidence can be kept, listed and alerted on
// without carrying an answer's body or an error's free text.
type ErrorClass string

// The error classes. The values match the CHECK in schema.sql.
const (
	ErrorNone      ErrorClass = ""          // no error: a 2xx with ack true, or not given
	ErrorTimeout   ErrorClass = "timeout"   // no answer in time
	ErrorRefused   ErrorClass = "refused"   // connection refused
	ErrorReset     ErrorClass = "reset"     // connection reset or broken pipe
	ErrorClosed    ErrorClass = "closed"    // connection closed before a full answer
	ErrorTransport ErrorClass = "transport" // another transport failure
	ErrorHTTP      ErrorClass = "http"      // an HTTP error status (4xx, 5xx); Status says which
	Error3xx       ErrorClass = "3xx"       // a redirect, never followed
	ErrorBadAck    ErrorClass = "badack"    // a 2xx whose ack is not exactly true
	ErrorLease     ErrorClass = "lease"     // the lease ran out unfinished (written by the queue)
)

// ErrorClasses lists every ErrorClass but ErrorNone.
func ErrorClasses() []ErrorClass {
	return []ErrorClass{ErrorTimeout, ErrorRefused, ErrorReset, ErrorClosed, ErrorTransport,
		ErrorHTTP, Error3xx, ErrorBadAck, ErrorLease}
}

// ParseErrorClass checks that s names an ErrorClass ("" is ErrorNone).
func ParseErrorClass(s string) (ErrorClass, error) {
	if s == "" {
		return ErrorNone, nil
	}
	for _, c := range ErrorClasses() {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("%w: error class %q: want timeout, refused, reset, closed, transport, http, 3xx, badack or lease", ErrInvalid, s)
}

// Evidence is what the transport adapter saw of one attempt: the HTTP
// status (0 when no answer came) and an error class. Finish and NoteAttempt
// keep it with the attempt, in the transaction that records it.
type Evidence struct {
	Status int        `json:"status"` // 100-599, or 0 for none
	Error  ErrorClass `json:"error"`
}

// Check refuses a status outside 100-599 (0 is none) and an unknown class.
func (e Evidence) Check() error {
	if e.Status != 0 {
		if err := checkRange("status", int64(e.Status), 100, 599); err != nil {
			return err
		}
	}
	_, err := ParseErrorClass(string(e.Error))
	return err
}

// String is the evidence for people: "503 http", "timeout", "200 badack".
func (e Evidence) String() string {
	switch {
	case e.Status == 0 && e.Error == "":
		return "-"
	case e.Status == 0:
		return string(e.Error)
	case e.Error == "":
		return strconv.Itoa(e.Status)
	}
	return strconv.Itoa(e.Status) + " " + string(e.Error)
}

// The outcomes an attempt row records besides Finish's own.
const (
	// OutcomeUndecided is an answer the sender could not decide (BadAck,
	// 3xx): no finish, the job stays leased until its lease runs out.
	OutcomeUndecided Outcome = "undecided"
	// OutcomeExpired is a lease that ran out with no finish.
	OutcomeExpired Outcome = "expired"
)

// Attempt is the evidence of one grant of a job, kept by the queue.
type Attempt struct {
	Token   int64   `json:"token"`   // the grant's fencing token
	Attempt int64   `json:"attempt"` // its number since enqueue or the last redrive
	Outcome Outcome `json:"outcome"` // ok, retry, permanent, undecided or expired
	Evidence
	AtMs int64 `json:"at_ms"` // when it was recorded
}

// MarshalJSON writes an absent status or error as null.
func (a Attempt) MarshalJSON() ([]byte, error) {
	var out struct {
		Token   int64       `json:"token"`
		Attempt int64       `json:"attempt"`
		Outcome Outcome     `json:"outcome"`
		Status  *int        `json:"status"`
		Error   *ErrorClass `json:"error"`
		AtMs    int64       `json:"at_ms"`
	}
	out.Token, out.Attempt, out.Outcome, out.AtMs = a.Token, a.Attempt, a.Outcome, a.AtMs
	if a.Status != 0 {
		out.Status = &a.Status
	}
	if a.Error != "" {
		out.Error = &a.Error
	}
	return json.Marshal(out)
}

// insertAttempt records the attempt of the grant (id, token) with outcome
// and evidence, only while that grant holds the job: it writes nothing
// (0 rows) otherwise. An earlier row of the same grant (an undecided
// answer, then a finish by hand) is completed, keeping what it saw when the
// finish saw nothing. Finish runs it before its own update, so the row is
// there when the triggers look.
const insertAttempt = `INSERT INTO attempts (job_id, token, attempt, outcome, status, error, at_ms)
	SELECT id, token, attempts, ?3, nullif(?4, 0), nullif(?5, ''), ?6 FROM jobs
	WHERE id = ?1 AND state = 'leased' AND token = ?2
	ON CONFLICT (job_id, token) DO UPDATE SET outcome = excluded.outcome, at_ms = excluded.at_ms,
		status = coalesce(excluded.status, status), error = coalesce(excluded.error, error)`

// NoteAttempt records the evidence of an answer the sender could not decide
// (a BadAck, a 3xx) for the grant with this token, without changing the
// job: it stays leased, and when its lease runs out the claim that finds it
// re-grants or quarantines it with this evidence kept. applied is false, and
// nothing is written, unless the job is leased under exactly this token.
func (q *Queue) NoteAttempt(ctx context.Context, id string, token int64, ev Evidence, now int64) (applied bool, err error) {
	if err := firstErr(CheckID("id", id), checkRange("token", token, 1, 1<<62),
		checkRange("now ms", now, 0, 1<<62), ev.Check()); err != nil {
		return false, err
	}
	if q.version < 5 {
		return false, fmt.Errorf("note attempt %s: schema version %d keeps no evidence", id, q.version)
	}
	res, err := q.stmt(ctx, insertAttempt).ExecContext(ctx, id, token, OutcomeUndecided, ev.Status, string(ev.Error), now)
	if err != nil {
		return false, fmt.Errorf("note attempt %s: %w", id, classify(err))
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// attemptsOf reads a job's attempts, oldest first; none from a file older
// than version 5.
func (q *Queue) attemptsOf(ctx context.Context, db queryer, id string) ([]Attempt, error) {
	out := []Attempt{}
	if q.version < 5 {
		return out, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT token, attempt, outcome, coalesce(status, 0), coalesce(error, ''), at_ms
		FROM attempts WHERE job_id = ? ORDER BY token`, id)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.Token, &a.Attempt, &a.Outcome, &a.Status, &a.Error, &a.AtMs); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Trail is what an operator reads beside a dead job: the evidence of its
// attempts, oldest first, and the latest look at it, if any.
type Trail struct {
	Attempts          []Attempt      `json:"attempts"`
	LastInvestigation *Investigation `json:"last_investigation"`
}

// Last is the latest attempt of the trail, nil when none was recorded.
func (t Trail) Last() *Attempt {
	if len(t.Attempts) == 0 {
		return nil
	}
	return &t.Attempts[len(t.Attempts)-1]
}

// Trails reads the trail of each job in ids, in one read transaction: a
// few seeks per job, so a list of dead jobs costs what it lists.
func (q *Queue) Trails(ctx context.Context, ids []string) (map[string]Trail, error) {
	out := make(map[string]Trail, len(ids))
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("trails: %w", classify(err))
	}
	defer tx.Rollback()
	for _, id := range ids {
		var t Trail
		if t.Attempts, err = q.attemptsOf(ctx, tx, id); err != nil {
			return nil, fmt.Errorf("trails %s: %w", id, err)
		}
		inv := Investigation{JobID: id}
		err := tx.QueryRowContext(ctx, `SELECT at_ms, note FROM investigations WHERE job_id = ?
			ORDER BY seq DESC LIMIT 1`, id).Scan(&inv.AtMs, &inv.Note)
		switch {
		case err == nil:
			t.LastInvestigation = &inv
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("trails %s: %w", id, classify(err))
		}
		out[id] = t
	}
	return out, nil
}
