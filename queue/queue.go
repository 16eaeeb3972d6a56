// Package queue is snacklab's durable job queue: snack orders in one SQLite
// file, handed out under leases with fencing tokens, finished as done or
// quarantined as dead with a reason, and brought back only by a redrive that
// a person asked for.
//
// Every method that changes a job is one atomic statement or one immediate
// transaction, so two processes sharing the file never both hold a job and a
// crash never leaves half a transition. CONTRACT.md is the normative text;
// this file follows it line by line.
package queue

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SchemaVersion is the PRAGMA user_version this package writes. Version 1
// files (the same tables, unmarked), version 2 files (the same tables, other
// indexes), version 3 files (a rowid jobs table without closed_at) and
// version 4 files (no attempts, no tallies) are read as they are and
// migrated on the first write (migrate_*.sql).
const SchemaVersion = 5

// ApplicationID ("snkq") is the PRAGMA application_id that marks a snacklab
// queue file, so another application's SQLite file is refused rather than
// read as an empty queue. The receiver's file is "snkr".
const ApplicationID = 0x736e6b71

//go:embed schema.sql
var schemaSQL string

// State is where a job is in its life. The values match the CHECK in schema.sql.
type State string

// The four states of a job (CONTRACT.md §2).
const (
	Pending State = "pending" // waiting for available_at
	Leased  State = "leased"  // held by an owner until lease_until, under a token
	Done    State = "done"    // delivered; final
	Dead    State = "dead"    // quarantined with a Reason; leaves only by Redrive
)

// States lists every State, in the order reports show them.
func States() []State { return []State{Pending, Leased, Done, Dead} }

// Reason says why a job is dead. The values match the CHECK in schema.sql.
type Reason string

// The reasons a job is quarantined.
const (
	ReasonPermanent Reason = "permanent" // the receiver refused it for good
	ReasonExhausted Reason = "exhausted" // every attempt was used
	ReasonDeadline  Reason = "deadline"  // the next try would be at or past its deadline
)

// Reasons lists every Reason, in the order reports show them.
func Reasons() []Reason { return []Reason{ReasonPermanent, ReasonExhausted, ReasonDeadline} }

// ParseReason checks that s names a Reason.
func ParseReason(s string) (Reason, error) {
	for _, r := range Reasons() {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w: reason %q: want permanent, exhausted or deadline", ErrInvalid, s)
}

// Outcome is what the transport adapter reports to Finish.
type Outcome string

// The outcomes Finish accepts.
const (
	OutcomeOK        Outcome = "ok"
	OutcomeRetry     Outcome = "retry"
	OutcomePermanent Outcome = "permanent"
)

// ParseOutcome checks that s names an Outcome.
func ParseOutcome(s string) (Outcome, error) {
	switch o := Outcome(s); o {
	case OutcomeOK, OutcomeRetry, OutcomePermanent:
		return o, nil
	}
	return "", fmt.Errorf("%w: outcome %q: want ok, retry or permanent", ErrInvalid, s)
}

// Errors callers test for. Each maps to one exit code in CONTRACT.md §6.
var (
	ErrInvalid        = errors.New("invalid value")
	ErrMissing        = errors.New("database file missing")
	ErrNotQueue       = errors.New("not a queue database")
	ErrBusy           = errors.New("database busy")
	ErrConflict       = errors.New("conflict: id already enqueued with another qty")
	ErrNotFound       = errors.New("job not found")
	ErrRedrivePending = errors.New("redrive refused: job is pending")
	ErrRedriveLeased  = errors.New("redrive refused: job is leased")
	ErrRedriveDone    = errors.New("redrive refused: job is done")
	// ErrNotImplemented is what a learner's starter copy returns from the
	// parts still to be written (docs/selftest.md); the reference never does.
	ErrNotImplemented = errors.New("not implemented")
)

// Bounds on values, from CONTRACT.md §1.
const (
	MaxQty            = 1_000_000
	MaxMaxAttempts    = 1000
	MaxDeadlineWindow = 365 * 24 * 3600 * 1000
	MaxLease          = 24 * 3600 * 1000
	BackoffBase       = 1000  // ms
	BackoffCap        = 60000 // ms
)

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	notePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/#-]{0,63}$`)
)

// CheckID refuses anything but a bounded ASCII identifier, so ids are safe to
// print in alerts and logs. Owners follow the same rule.
func CheckID(what, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w: %s %q: want 1-64 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit", ErrInvalid, what, id)
	}
	return nil
}

// CheckNote refuses notes that are not ticket-like identifiers, so raw error
// text or personal data cannot land in the audit record by accident.
func CheckNote(note string) error {
	if !notePattern.MatchString(note) {
		return fmt.Errorf("%w: note %q: want a ticket id of 1-64 characters of A-Z a-z 0-9 . _ : / # - starting with a letter or digit (no spaces, no free text)", ErrInvalid, note)
	}
	return nil
}

// firstErr returns the first failed check, so an error stays one line.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func checkRange(what string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%w: %s %d: want %d to %d", ErrInvalid, what, v, lo, hi)
	}
	return nil
}

// Backoff is the delay before attempt+1 after attempt failed: exponential
// with a cap and "equal jitter" derived from the id and attempt, so that a
// grader (or a learner with a pencil) can predict every value.
//
//	d = min(cap, base·2^(attempt-1)); delay = d/2 + FNV-1a-64("<id>:<attempt>") mod (d/2+1)
func Backoff(id string, attempt int) int64 {
	// BEGIN SOLUTION backoff: d = min(cap, base*2^(attempt-1)); return d/2 + FNV-1a-64("<id>:<attempt>") mod (d/2+1) (CONTRACT.md §2 backoff)
	if attempt < 1 {
		attempt = 1
	}
	d := int64(BackoffBase)
	for i := 1; i < attempt && d < BackoffCap; i++ {
		d *= 2
	}
	d = min(d, BackoffCap)
	h := fnv.New64a()
	h.Write([]byte(id + ":" + strconv.Itoa(attempt)))
	half := d / 2
	return half + int64(h.Sum64()%uint64(half+1))
	// END SOLUTION backoff
	// STARTER: panic(fmt.Errorf("backoff: %w (queue/queue.go: Backoff)", ErrNotImplemented))
}

// Job is one snack order and its delivery state. Times are ms since the epoch.
type Job struct {
	ID               string `json:"id" db:"id"`
	Qty              int64  `json:"qty" db:"qty"`
	State            State  `json:"state" db:"state"`
	Reason           Reason `json:"reason" db:"reason"`     // "" unless Dead; null in JSON
	Attempts         int64  `json:"attempts" db:"attempts"` // grants since enqueue or the last redrive
	MaxAttempts      int64  `json:"max_attempts" db:"max_attempts"`
	Token            int64  `json:"token" db:"token"` // fencing token of the latest grant; never decreases
	Owner            string `json:"owner" db:"owner"` // "" unless Leased; null in JSON
	LeaseUntil       int64  `json:"lease_until" db:"lease_until"`
	AvailableAt      int64  `json:"available_at" db:"available_at"`
	DeadlineAt       int64  `json:"deadline_at" db:"deadline_at"`
	DeadlineWindowMs int64  `json:"deadline_window_ms" db:"deadline_window_ms"`
	CreatedAt        int64  `json:"created_at" db:"created_at"`
	UpdatedAt        int64  `json:"updated_at" db:"updated_at"` // for a dead job: when it died
}

// MarshalJSON writes unset reason, owner and lease_until as null, as the contract says.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job
	var out struct {
		plain
		Reason     *Reason `json:"reason"`
		Owner      *string `json:"owner"`
		LeaseUntil *int64  `json:"lease_until"`
	}
	out.plain = plain(j)
	if j.Reason != "" {
		out.Reason = &j.Reason
	}
	if j.State == Leased {
		out.Owner, out.LeaseUntil = &j.Owner, &j.LeaseUntil
	}
	return json.Marshal(out)
}

// Redrive is the audit row of one redrive.
type Redrive struct {
	JobID      string `json:"job_id" db:"job_id"`
	PrevToken  int64  `json:"prev_token" db:"prev_token"`
	PrevReason Reason `json:"prev_reason" db:"prev_reason"`
	AtMs       int64  `json:"at_ms" db:"at_ms"`
	Note       string `json:"note" db:"note"`
}

// Investigation is the audit row of one look at a job.
type Investigation struct {
	JobID string `json:"job_id" db:"job_id"`
	AtMs  int64  `json:"at_ms" db:"at_ms"`
	Note  string `json:"note" db:"note"`
}

// Options configure Open.
type Options struct {
	// Create makes the file and its schema when missing. Only `queuectl init`
	// sets it: every other program refuses a missing file rather than
	// silently starting an empty queue somewhere unexpected.
	Create bool
	// ReadOnly opens the file mode=ro: nothing is ever written, not even a
	// journal-mode switch or a version mark, so a report cannot change what
	// it reports on. A version 1 file is read as it is.
	ReadOnly bool
	// BusyTimeout is how long a statement waits for another process's lock
	// before failing with ErrBusy. Zero means 5s.
	BusyTimeout time.Duration
}

// Queue is an open queue file. It is safe for concurrent use; statements
// run one at a time on a single connection.
type Queue struct {
	db   *sql.DB
	path string
	abs  string // the file's absolute path
	// busyTimeout is Options.BusyTimeout as opened.
	busyTimeout time.Duration
	// version is the file's schema version as opened: SchemaVersion, or an
	// older one read as it is (ReadOnly), whose reads take the old ways.
	version int

	mu    sync.Mutex
	stmts map[string]*sql.Stmt // by query text; see stmt
}

// statement is a prepared statement, or a query to be prepared at its call.
type statement interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}

// stmt returns query prepared once for the life of q. SQLite parses and
// plans a statement each time it is prepared, which costs a long-running
// writer such as `sender run` about as much as a page written per statement;
// a statement prepared once costs that once. When the preparation fails the
// query runs unprepared, to fail again with its error where it is used. Call
// it outside a transaction (the one connection is the transaction's) and
// bind the result to the transaction with inTx.
func (q *Queue) stmt(ctx context.Context, query string) statement {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s, ok := q.stmts[query]; ok {
		return s
	}
	s, err := q.db.PrepareContext(ctx, query)
	if err != nil {
		return unprepared{q.db, query}
	}
	if q.stmts == nil {
		q.stmts = map[string]*sql.Stmt{}
	}
	q.stmts[query] = s
	return s
}

// inTx binds a statement from stmt to tx.
func inTx(ctx context.Context, tx *sql.Tx, s statement) statement {
	if ps, ok := s.(*sql.Stmt); ok {
		return tx.StmtContext(ctx, ps)
	}
	return unprepared{tx, s.(unprepared).query}
}

// unprepared runs a query on a *sql.DB or *sql.Tx as a statement would.
type unprepared struct {
	c interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	query string
}

func (u unprepared) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return u.c.ExecContext(ctx, u.query, args...)
}

func (u unprepared) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return u.c.QueryRowContext(ctx, u.query, args...)
}

// Open opens the queue file at path, checks the file's header, the
// connection settings, the mark, the schema version and the tables, and
// refuses a file that is not a queue without writing to it. A writable open
// of a version 1, 2 or 3 queue migrates it to version 4.
func Open(path string, opts Options) (*Queue, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := inspect(abs, opts.Create && !opts.ReadOnly); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	// Connection settings in one place. journal_mode=DELETE is a rollback
	// journal: each commit is one journal write, one db write and their
	// fsyncs, which suits short queue writes. synchronous=EXTRA, not FULL:
	// a commit ends by unlinking the journal, and only EXTRA then syncs the
	// directory; under FULL a power cut after the answer can bring the
	// journal back, hot, and the next open rolls the answered commit back
	// (lab crash --power-cut, docs/crash.md). _txlock makes
	// every transaction BEGIN IMMEDIATE, taking the write lock up front so
	// that a read-then-write can never be overtaken by another process. A
	// read-only open sets no journal mode (it would be a write) and only
	// reads it back.
	params := "?mode=rw&_journal_mode=DELETE&_txlock=immediate"
	switch {
	case opts.ReadOnly:
		params = "?mode=ro&_txlock=deferred"
	case opts.Create:
		params = "?mode=rwc&_journal_mode=DELETE&_txlock=immediate"
	}
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + params +
		"&_busy_timeout=" + strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10) +
		"&_synchronous=EXTRA&_foreign_keys=1"
	q, err := open(path, dsn, opts)
	if opts.ReadOnly && isHotJournal(err) {
		// A writer crashed mid-commit and left a hot journal, which a
		// read-only connection may not roll back. Any reader must: let a
		// writable connection restore the last commit, then read read-only.
		if rerr := rollBackHotJournal(abs, opts.BusyTimeout); rerr != nil {
			return nil, fmt.Errorf("open %s: roll back a crashed writer's journal: %w", path, rerr)
		}
		q, err = open(path, dsn, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return q, nil
}

func open(path, dsn string, opts Options) (*Queue, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	abs, err := filepath.Abs(path)
	if err != nil {
		db.Close()
		return nil, err
	}
	q := &Queue{db: db, path: path, abs: abs, busyTimeout: opts.BusyTimeout}
	if err := q.check(opts); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// check reads back the pragmas, the mark and the schema version and checks
// the tables, creating the schema in a fresh file or marking a version 1
// file when allowed.
func (q *Queue) check(opts Options) error {
	ctx := context.Background()
	var mode string
	if err := q.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return classify(err)
	}
	if mode != "delete" {
		return fmt.Errorf("%w: journal_mode is %q, want delete (a rollback journal); nothing was changed", ErrNotQueue, mode)
	}
	var syncMode int
	if err := q.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return classify(err)
	}
	if syncMode != 3 {
		return fmt.Errorf("synchronous is %d, want 3 (EXTRA)", syncMode)
	}
	m, err := readMark(ctx, q.db)
	if err != nil {
		return err
	}
	q.version = SchemaVersion
	switch {
	case m.version == SchemaVersion && m.appID == ApplicationID:
		return checkTables(ctx, q.db)
	case m.version == 1 && m.appID == 0, m.version >= 2 && m.version < SchemaVersion && m.appID == ApplicationID:
		if err := checkTables(ctx, q.db); err != nil {
			return err
		}
		if opts.ReadOnly {
			q.version = m.version
			return nil
		}
		return q.migrate(ctx)
	case m.version == 0 && m.appID == 0 && m.objects == 0 && opts.Create && !opts.ReadOnly:
		tx, err := q.db.BeginTx(ctx, nil)
		if err != nil {
			return classify(err)
		}
		defer tx.Rollback()
		if m, err := readMark(ctx, tx); err != nil {
			return err
		} else if m.objects > 0 {
			return checkTables(ctx, tx) // another init won the race
		}
		if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
			return fmt.Errorf("create schema: %w", classify(err))
		}
		return classify(tx.Commit())
	case m.version == 0 && m.appID == 0 && m.objects == 0:
		return fmt.Errorf("%w: empty database without the queue schema (run `queuectl init`)", ErrNotQueue)
	case m.appID != 0 && m.appID != ApplicationID:
		return fmt.Errorf("%w: another application's SQLite file (application_id %#x, want %#x)", ErrNotQueue, m.appID, ApplicationID)
	default:
		return fmt.Errorf("%w: schema version %d with application_id %#x, want version 1 to %d of a snacklab queue", ErrNotQueue, m.version, m.appID, SchemaVersion)
	}
}

// classify turns SQLite result codes into the sentinels callers test for.
func classify(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %v", ErrBusy, err)
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("%w: %v", ErrNotQueue, err)
	}
	return err
}

// Close closes the file.
func (q *Queue) Close() error {
	q.mu.Lock()
	for _, s := range q.stmts {
		s.Close()
	}
	q.stmts = nil
	q.mu.Unlock()
	return q.db.Close()
}

// JournalMode reads the journal mode back, so labs can show it is a rollback journal.
func (q *Queue) JournalMode(ctx context.Context) (string, error) {
	var mode string
	err := q.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	return mode, classify(err)
}

const jobCols = `id, qty, state, coalesce(reason, ''), attempts, max_attempts, token,
	coalesce(owner, ''), coalesce(lease_until, 0), available_at, deadline_at,
	deadline_window_ms, created_at, updated_at`

type scanner interface{ Scan(...any) error }

func scanJob(s scanner) (Job, error) {
	var j Job
	err := s.Scan(&j.ID, &j.Qty, &j.State, &j.Reason, &j.Attempts, &j.MaxAttempts, &j.Token,
		&j.Owner, &j.LeaseUntil, &j.AvailableAt, &j.DeadlineAt, &j.DeadlineWindowMs,
		&j.CreatedAt, &j.UpdatedAt)
	return j, err
}

// NewJob is what Enqueue accepts.
type NewJob struct {
	ID               string
	Qty              int64
	MaxAttempts      int64
	DeadlineWindowMs int64 // the deadline is now + this, and again at each redrive
}

// Enqueue durably accepts a job: it returns only after the commit. Enqueuing
// the same id and qty again changes nothing and reports duplicate; the same id
// with another qty is ErrConflict.
func (q *Queue) Enqueue(ctx context.Context, nj NewJob, now int64) (job Job, duplicate bool, err error) {
	if err := firstErr(CheckID("id", nj.ID), checkRange("qty", nj.Qty, 1, MaxQty),
		checkRange("max attempts", nj.MaxAttempts, 1, MaxMaxAttempts),
		checkRange("deadline window ms", nj.DeadlineWindowMs, 1, MaxDeadlineWindow),
		checkRange("now ms", now, 0, 1<<62)); err != nil {
		return Job{}, false, err
	}
	// BEGIN SOLUTION enqueue: insert the job and commit before returning; the same id and qty again is a duplicate that changes nothing, another qty is ErrConflict (CONTRACT.md §2 enqueue)
	// One statement: the insert either happens or, for an existing id, does
	// nothing. Rows are never deleted and qty never changes, so the read that
	// follows a no-op insert sees the row that blocked it.
	row := q.stmt(ctx, `INSERT INTO jobs
		(id, qty, max_attempts, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?4 + ?5, ?5, ?4, ?4)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+jobCols).QueryRowContext(ctx, nj.ID, nj.Qty, nj.MaxAttempts, now, nj.DeadlineWindowMs)
	job, err = scanJob(row)
	if err == nil {
		return job, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Job{}, false, fmt.Errorf("enqueue %s: %w", nj.ID, classify(err))
	}
	job, err = q.Get(ctx, nj.ID)
	if err != nil {
		return Job{}, false, fmt.Errorf("enqueue %s: %w", nj.ID, err)
	}
	if job.Qty != nj.Qty {
		return job, false, fmt.Errorf("enqueue %s with qty %d: %w %d", nj.ID, nj.Qty, ErrConflict, job.Qty)
	}
	return job, true, nil
	// END SOLUTION enqueue
	// STARTER: return Job{}, false, fmt.Errorf("enqueue %s: %w (queue/queue.go: Enqueue)", nj.ID, ErrNotImplemented)
}

// Get reads one job.
func (q *Queue) Get(ctx context.Context, id string) (Job, error) {
	job, err := scanJob(q.db.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, fmt.Errorf("get %s: %w", id, classify(err))
	}
	return job, nil
}

// Claim grants one due job to owner until now+leaseMs, counting the attempt
// and bumping the fencing token by exactly one. It reports ok=false when
// nothing is claimable. A lease whose holder vanished is expired at
// lease_until itself; if that holder used the last attempt or the deadline
// has passed, the job is quarantined here instead of handed out again.
func (q *Queue) Claim(ctx context.Context, owner string, now, leaseMs int64) (job Job, ok bool, err error) {
	if err := firstErr(CheckID("owner", owner), checkRange("lease ms", leaseMs, 1, MaxLease),
		checkRange("now ms", now, 0, 1<<62)); err != nil {
		return Job{}, false, err
	}
	// BEGIN SOLUTION claim: in one immediate transaction, quarantine spent jobs, then lease the first due job with attempts+1 and token+1 (CONTRACT.md §2 claim)
	// The quarantine writes only when something is spent: the look is two
	// seeks, in jobs_due and jobs_last_lease (schema.sql), whose WHERE terms
	// the queries here repeat so that SQLite uses them. A live job at its
	// deadline is spent unless it holds a lease still running.
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
	// A spent lease ended unfinished: its attempt's row says so, unless its
	// holder left evidence of an answer it could not decide, which stays.
	expired := q.stmt(ctx, `INSERT OR IGNORE INTO attempts (job_id, token, attempt, outcome, error, at_ms)
			SELECT id, token, attempts, 'expired', 'lease', ?1 FROM jobs
			WHERE id IN (SELECT id FROM jobs WHERE closed_at IS NULL AND deadline_at <= ?1 AND lease_until <= ?1
			             UNION ALL
			             SELECT id FROM jobs WHERE closed_at IS NULL AND attempts >= max_attempts
			                 AND lease_until <= ?1)`)
	// The first claimable job in jobs_open's order: a pending job is due
	// when its available_at is, a leased one when its lease has run out (a
	// lease always starts at or after the job's available_at). The grant
	// sets no column jobs_open or jobs_due names, so it moves neither.
	grant := q.stmt(ctx, `UPDATE jobs SET state = 'leased',
		owner = ?2, lease_until = ?1 + ?3, attempts = attempts + 1, token = token + 1, updated_at = ?1
		WHERE id = (SELECT id FROM jobs
		            WHERE closed_at IS NULL AND available_at <= ?1 AND (state = 'pending' OR lease_until <= ?1)
		            ORDER BY available_at, id LIMIT 1)
		RETURNING `+jobCols)
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return Job{}, false, fmt.Errorf("claim: %w", classify(err))
	}
	defer tx.Rollback()
	var spent bool
	if err := inTx(ctx, tx, look).QueryRowContext(ctx, now).Scan(&spent); err != nil {
		return Job{}, false, fmt.Errorf("claim: look for spent jobs: %w", classify(err))
	}
	if spent {
		if _, err := inTx(ctx, tx, expired).ExecContext(ctx, now); err != nil {
			return Job{}, false, fmt.Errorf("claim: evidence of spent leases: %w", classify(err))
		}
		if _, err := inTx(ctx, tx, sweep).ExecContext(ctx, now); err != nil {
			return Job{}, false, fmt.Errorf("claim: quarantine spent jobs: %w", classify(err))
		}
	}
	job, err = scanJob(inTx(ctx, tx, grant).QueryRowContext(ctx, now, owner, leaseMs))
	if errors.Is(err, sql.ErrNoRows) {
		// Commit anyway: quarantining spent jobs is progress worth keeping.
		return Job{}, false, classify(tx.Commit())
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("claim: %w", classify(err))
	}
	if err := tx.Commit(); err != nil {
		return Job{}, false, fmt.Errorf("claim: commit: %w", classify(err))
	}
	return job, true, nil
	// END SOLUTION claim
	// STARTER: return Job{}, false, fmt.Errorf("claim: %w (queue/queue.go: Claim)", ErrNotImplemented)
}

// Finish records the outcome of the grant with this token. It applies only
// while the job is leased under exactly this token; otherwise it reports
// applied=false and writes nothing, so a holder that lost its lease can never
// overwrite the work of the one that reclaimed it. The returned job is the
// state after the call (zero if the id is unknown). The attempt's row, with
// the evidence when given (at most one), is written in the same transaction.
func (q *Queue) Finish(ctx context.Context, id string, token int64, outcome Outcome, now int64, evidence ...Evidence) (job Job, applied bool, err error) {
	if _, err := ParseOutcome(string(outcome)); err != nil {
		return Job{}, false, err
	}
	var ev Evidence
	if len(evidence) > 1 {
		return Job{}, false, fmt.Errorf("%w: finish %s: %d evidences, want at most one", ErrInvalid, id, len(evidence))
	} else if len(evidence) == 1 {
		ev = evidence[0]
	}
	if err := firstErr(CheckID("id", id), checkRange("token", token, 0, math.MaxInt64),
		checkRange("now ms", now, 0, 1<<62), ev.Check()); err != nil {
		return Job{}, false, err
	}
	// BEGIN SOLUTION finish: only while leased under exactly this token: ok → done, permanent → dead, retry → exhausted, deadline or pending at now+backoff; release owner and lease (CONTRACT.md §2 finish)
	// The attempt's row first, guarded as the update is: none written
	// means the grant does not hold the job, and nothing is.
	record := q.stmt(ctx, insertAttempt)
	// ok and permanent need nothing from the row: one guarded statement.
	finish := q.stmt(ctx, `UPDATE jobs SET state = ?3, reason = nullif(?4, ''),
			owner = NULL, lease_until = NULL, updated_at = ?5, closed_at = ?5
			WHERE id = ?1 AND state = 'leased' AND token = ?2
			RETURNING `+jobCols)
	// retry needs the attempts and the deadline for the backoff: read, then
	// update, in the same immediate transaction.
	read := q.stmt(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`)
	update := q.stmt(ctx, `UPDATE jobs SET state = ?3, reason = nullif(?4, ''),
		available_at = ?5, owner = NULL, lease_until = NULL, updated_at = ?6,
		closed_at = CASE WHEN ?3 = 'pending' THEN NULL ELSE ?6 END
		WHERE id = ?1 AND state = 'leased' AND token = ?2
		RETURNING `+jobCols)
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return Job{}, false, fmt.Errorf("finish %s: %w", id, classify(err))
	}
	defer tx.Rollback()
	job, err = scanJob(inTx(ctx, tx, read).QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, false, nil
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("finish %s: %w", id, classify(err))
	}
	if job.State != Leased || job.Token != token {
		return job, false, nil // not applied, nothing written: the job as it is
	}
	if _, err := inTx(ctx, tx, record).ExecContext(ctx, id, token, outcome, ev.Status, string(ev.Error), now); err != nil {
		return Job{}, false, fmt.Errorf("finish %s: evidence: %w", id, classify(err))
	}
	state, reason, availableAt := Done, Reason(""), job.AvailableAt
	switch outcome {
	case OutcomePermanent:
		state, reason = Dead, ReasonPermanent
	case OutcomeRetry:
		next := now + Backoff(job.ID, int(job.Attempts))
		switch {
		case job.Attempts >= job.MaxAttempts:
			state, reason = Dead, ReasonExhausted
		case next >= job.DeadlineAt:
			state, reason = Dead, ReasonDeadline
		default:
			state, availableAt = Pending, next
		}
	}
	if outcome != OutcomeRetry {
		job, err = scanJob(inTx(ctx, tx, finish).QueryRowContext(ctx, id, token, state, reason, now))
	} else {
		job, err = scanJob(inTx(ctx, tx, update).QueryRowContext(ctx, id, token, state, reason, availableAt, now))
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("finish %s: %w", id, classify(err))
	}
	if err := tx.Commit(); err != nil {
		return Job{}, false, fmt.Errorf("finish %s: commit: %w", id, classify(err))
	}
	return job, true, nil
	// END SOLUTION finish
	// STARTER: return Job{}, false, fmt.Errorf("finish %s: %w (queue/queue.go: Finish)", id, ErrNotImplemented)
}

// Redrive brings a dead job back as pending with a fresh attempt budget and
// deadline, writing its audit row in the same transaction. The token is kept:
// the next claim grants token+1, so a completion from before the redrive
// remains stale. Only dead jobs can be redriven.
func (q *Queue) Redrive(ctx context.Context, id, note string, now int64) (Job, Redrive, error) {
	if err := firstErr(CheckID("id", id), CheckNote(note), checkRange("now ms", now, 0, 1<<62)); err != nil {
		return Job{}, Redrive{}, err
	}
	// BEGIN SOLUTION redrive: only a dead job; in one transaction insert the audit row and make the job pending with attempts 0 and a new deadline, keeping the token (CONTRACT.md §2 redrive)
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return Job{}, Redrive{}, fmt.Errorf("redrive %s: %w", id, classify(err))
	}
	defer tx.Rollback()
	job, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, Redrive{}, fmt.Errorf("redrive: %w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, Redrive{}, fmt.Errorf("redrive %s: %w", id, classify(err))
	}
	switch job.State {
	case Pending:
		return job, Redrive{}, fmt.Errorf("redrive %s: %w", id, ErrRedrivePending)
	case Leased:
		return job, Redrive{}, fmt.Errorf("redrive %s: %w", id, ErrRedriveLeased)
	case Done:
		return job, Redrive{}, fmt.Errorf("redrive %s: %w", id, ErrRedriveDone)
	}
	rd := Redrive{JobID: id, PrevToken: job.Token, PrevReason: job.Reason, AtMs: now, Note: note}
	if _, err := tx.ExecContext(ctx, `INSERT INTO redrives (job_id, prev_token, prev_reason, at_ms, note)
		VALUES (?, ?, ?, ?, ?)`, rd.JobID, rd.PrevToken, rd.PrevReason, rd.AtMs, rd.Note); err != nil {
		return Job{}, Redrive{}, fmt.Errorf("redrive %s: audit: %w", id, classify(err))
	}
	job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET state = 'pending', reason = NULL,
		attempts = 0, available_at = ?2, deadline_at = ?2 + deadline_window_ms, updated_at = ?2, closed_at = NULL
		WHERE id = ?1 AND state = 'dead'
		RETURNING `+jobCols, id, now))
	if err != nil {
		return Job{}, Redrive{}, fmt.Errorf("redrive %s: %w", id, classify(err))
	}
	if err := tx.Commit(); err != nil {
		return Job{}, Redrive{}, fmt.Errorf("redrive %s: commit: %w", id, classify(err))
	}
	return job, rd, nil
	// END SOLUTION redrive
	// STARTER: return Job{}, Redrive{}, fmt.Errorf("redrive %s: %w (queue/queue.go: Redrive)", id, ErrNotImplemented)
}

// Investigate records that a person looked at a job, pointing at their ticket.
// It never changes the job: looking is not fixing.
func (q *Queue) Investigate(ctx context.Context, id, note string, now int64) (Investigation, error) {
	if err := firstErr(CheckID("id", id), CheckNote(note), checkRange("now ms", now, 0, 1<<62)); err != nil {
		return Investigation{}, err
	}
	res, err := q.db.ExecContext(ctx, `INSERT INTO investigations (job_id, at_ms, note)
		SELECT id, ?2, ?3 FROM jobs WHERE id = ?1`, id, now, note)
	if err != nil {
		return Investigation{}, fmt.Errorf("investigate %s: %w", id, classify(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Investigation{}, fmt.Errorf("investigate: %w: %q", ErrNotFound, id)
	}
	return Investigation{JobID: id, AtMs: now, Note: note}, nil
}

// History is a job with its audit trail and the evidence of its attempts.
type History struct {
	Job            Job             `json:"job"`
	Redrives       []Redrive       `json:"redrives"`
	Investigations []Investigation `json:"investigations"`
	Attempts       []Attempt       `json:"attempts"`
}

// Show reads a job and every redrive, investigation and attempt of it,
// oldest first.
func (q *Queue) Show(ctx context.Context, id string) (History, error) {
	job, err := q.Get(ctx, id)
	if err != nil {
		return History{}, err
	}
	h := History{Job: job, Redrives: []Redrive{}, Investigations: []Investigation{}}
	if h.Attempts, err = q.attemptsOf(ctx, q.db, id); err != nil {
		return History{}, fmt.Errorf("show %s: %w", id, err)
	}
	rows, err := q.db.QueryContext(ctx, `SELECT job_id, prev_token, prev_reason, at_ms, note
		FROM redrives WHERE job_id = ? ORDER BY seq`, id)
	if err != nil {
		return History{}, fmt.Errorf("show %s: %w", id, classify(err))
	}
	for rows.Next() {
		var r Redrive
		if err := rows.Scan(&r.JobID, &r.PrevToken, &r.PrevReason, &r.AtMs, &r.Note); err != nil {
			rows.Close()
			return History{}, fmt.Errorf("show %s: %w", id, err)
		}
		h.Redrives = append(h.Redrives, r)
	}
	if err := rows.Close(); err != nil {
		return History{}, fmt.Errorf("show %s: %w", id, err)
	}
	rows, err = q.db.QueryContext(ctx, `SELECT job_id, at_ms, note FROM investigations
		WHERE job_id = ? ORDER BY seq`, id)
	if err != nil {
		return History{}, fmt.Errorf("show %s: %w", id, classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var i Investigation
		if err := rows.Scan(&i.JobID, &i.AtMs, &i.Note); err != nil {
			return History{}, fmt.Errorf("show %s: %w", id, err)
		}
		h.Investigations = append(h.Investigations, i)
	}
	return h, rows.Err()
}

// Stats is what an operator needs to see that the quarantine is looked after.
type Stats struct {
	Counts       map[State]int64  `json:"counts"`
	DeadByReason map[Reason]int64 `json:"dead_by_reason"`
	// OldestDead is the job quarantined longest ago, nil when none is dead.
	OldestDead *Job `json:"oldest_dead"`
	// LastInvestigationMs is the latest investigation, 0 when none.
	LastInvestigationMs int64 `json:"last_investigation_at"`
	Investigations      int64 `json:"investigations"`
	// Redriven counts jobs ever redriven by their state now.
	Redriven map[State]int64 `json:"redriven"`
	Redrives int64           `json:"redrives"`
}

// statsQueries are Stats' counts. None reads every job: live jobs are
// counted in the live indexes (closed_at IS NULL), done ones in the tally
// the triggers keep, dead ones in jobs_dead, redriven ones by their audit
// rows, so the cost is O(live + dead + audit), not O(all jobs), and the read
// lock is held for milliseconds however old the file (docs/operations.md).
var statsQueries = struct{ counts, deadByReason, redriven, oldestDead string }{
	counts: `SELECT state, count(*) FROM jobs WHERE closed_at IS NULL GROUP BY state
		UNION ALL SELECT 'done', n FROM tallies WHERE name = 'done'
		UNION ALL SELECT 'dead', count(*) FROM jobs WHERE reason IS NOT NULL`,
	deadByReason: `SELECT reason, count(*) FROM jobs WHERE reason IS NOT NULL GROUP BY reason`,
	redriven:     `SELECT state, count(*) FROM jobs WHERE id IN (SELECT job_id FROM redrives) GROUP BY state`,
	oldestDead: `SELECT ` + jobCols + ` FROM jobs WHERE reason IS NOT NULL
		ORDER BY closed_at, id LIMIT 1`,
}

// statsQueriesV4 count a file older than version 5, read as it is, the old
// way: by reading every job.
var statsQueriesV4 = struct{ counts, deadByReason, redriven, oldestDead string }{
	counts:       `SELECT state, count(*) FROM jobs GROUP BY state`,
	deadByReason: `SELECT reason, count(*) FROM jobs WHERE state = 'dead' GROUP BY reason`,
	redriven:     statsQueries.redriven,
	oldestDead: `SELECT ` + jobCols + ` FROM jobs WHERE state = 'dead'
		ORDER BY updated_at, id LIMIT 1`,
}

// Stats counts jobs by state, dead jobs by reason, and what became of redrives,
// in one read transaction so the figures agree with each other.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	s := Stats{Counts: map[State]int64{}, DeadByReason: map[Reason]int64{}, Redriven: map[State]int64{}}
	for _, st := range States() {
		s.Counts[st], s.Redriven[st] = 0, 0
	}
	for _, r := range Reasons() {
		s.DeadByReason[r] = 0
	}
	sq := statsQueries
	if q.version < 5 {
		sq = statsQueriesV4
	}
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", classify(err))
	}
	defer tx.Rollback()
	count := func(query string, add func(key string, n int64)) error {
		rows, err := tx.QueryContext(ctx, query)
		if err != nil {
			return classify(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				return err
			}
			add(k, n)
		}
		return rows.Err()
	}
	if err := errors.Join(
		count(sq.counts, func(k string, n int64) { s.Counts[State(k)] = n }),
		count(sq.deadByReason, func(k string, n int64) { s.DeadByReason[Reason(k)] = n }),
		count(sq.redriven, func(k string, n int64) { s.Redriven[State(k)] = n }),
	); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(at_ms), 0) FROM investigations`).
		Scan(&s.Investigations, &s.LastInvestigationMs); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", classify(err))
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM redrives`).Scan(&s.Redrives); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", classify(err))
	}
	oldest, err := scanJob(tx.QueryRowContext(ctx, sq.oldestDead))
	switch {
	case err == nil:
		s.OldestDead = &oldest
	case !errors.Is(err, sql.ErrNoRows):
		return Stats{}, fmt.Errorf("stats: %w", classify(err))
	}
	return s, nil
}

// AllDead is the diedAtOrBefore that lets ListDead list every dead job.
const AllDead = int64(math.MaxInt64)

// ListDead lists quarantined jobs, oldest first: those with reason (every
// reason when "") that died at or before diedAtOrBefore (ms; AllDead for all),
// at most limit of them (all when limit <= 0). It reads only jobs_dead and
// the rows it lists.
func (q *Queue) ListDead(ctx context.Context, reason Reason, diedAtOrBefore int64, limit ...int) ([]Job, error) {
	n := -1
	if len(limit) > 0 && limit[0] > 0 {
		n = limit[0]
	}
	query := `SELECT ` + jobCols + ` FROM jobs WHERE reason IS NOT NULL
		AND (?1 = '' OR reason = ?1) AND closed_at <= ?2
		ORDER BY closed_at, id LIMIT ?3`
	if q.version < 5 {
		query = `SELECT ` + jobCols + ` FROM jobs WHERE state = 'dead'
		AND (?1 = '' OR reason = ?1) AND updated_at <= ?2
		ORDER BY updated_at, id LIMIT ?3`
	}
	rows, err := q.db.QueryContext(ctx, query, string(reason), diedAtOrBefore, n)
	if err != nil {
		return nil, fmt.Errorf("list dead: %w", classify(err))
	}
	defer rows.Close()
	jobs := []Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list dead: %w", err)
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}
