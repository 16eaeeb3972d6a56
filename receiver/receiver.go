// Package receiver is the idempotent HTTP end of the lab (CONTRACT §5): it
// records an order id and its stock effect in one SQLite transaction, so a
// sender that delivers the same order twice moves stock once.
package receiver

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors a caller maps to exit codes (CONTRACT §6).
var (
	// ErrInvalid marks a value outside the contract's rules (exit 3).
	ErrInvalid = errors.New("invalid value")
	// ErrNotDatabase marks a file that is not SQLite, is corrupt, or is
	// some other program's database (exit 5).
	ErrNotDatabase = errors.New("not a receiver database")
	// ErrBusy marks a database still locked when the busy timeout ran out
	// (exit 6).
	ErrBusy = errors.New("database busy")
	// ErrMalformed marks a POST /orders body the receiver refuses (400).
	ErrMalformed = errors.New("malformed order")
	// ErrNotImplemented is what a learner's starter copy returns from the
	// parts still to be written (docs/selftest.md); the reference never does.
	ErrNotImplemented = errors.New("not implemented")
)

const (
	// applicationID ("snkr") and schemaVersion tell the receiver's file
	// apart from the queue's, so pointing --db at the queue cannot scribble
	// receiver tables into it.
	applicationID = 0x736e6b72
	schemaVersion = 1

	defaultBusyTimeout = 5 * time.Second
	maxBusyTimeout     = 24 * time.Hour
)

//go:embed schema.sql
var schemaSQL string

// Options tune a Receiver; the zero value is ready to use.
type Options struct {
	// BusyTimeout is how long a write waits for another process's lock;
	// zero means the contract's default of 5 s.
	BusyTimeout time.Duration
	// Log receives one JSON line per POST /orders; nil discards them.
	Log io.Writer
	// Now stamps at_ms; tests inject a fixed clock. Nil means time.Now.
	Now func() time.Time
	// Faults are in force from the first request.
	Faults Faults
}

// Receiver serves CONTRACT §5 over one SQLite file. It is safe for
// concurrent use by the handlers of one http.Server.
type Receiver struct {
	db  *sql.DB
	now func() time.Time

	logMu sync.Mutex
	log   io.Writer

	mu     sync.Mutex // guards faults
	faults Faults

	writeTimeout time.Duration // per answer, set by Server; 0: none

	quit     chan struct{} // closed by ReleaseHeld
	quitOnce sync.Once
}

// Open opens the receiver's database at path, creating and initialising it
// when missing or empty. Every value is checked before the file is touched,
// so a refused start leaves no file behind.
func Open(path string, opts Options) (*Receiver, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database path is empty", ErrInvalid)
	}
	if opts.BusyTimeout < 0 || opts.BusyTimeout > maxBusyTimeout {
		return nil, fmt.Errorf("%w: busy timeout must be from 0 to %v", ErrInvalid, maxBusyTimeout)
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = defaultBusyTimeout
	}
	if err := opts.Faults.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(abs, opts.BusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection: requests of this process queue in Go rather than
	// racing each other for SQLite's file lock; busy_timeout is left for
	// other processes.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := checkSettings(db, opts.BusyTimeout); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := initSchema(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Receiver{
		db:     db,
		now:    opts.Now,
		log:    opts.Log,
		faults: opts.Faults.normalized(),
		quit:   make(chan struct{}),
	}, nil
}

// dsn asks for a rollback journal and every fsync a power cut needs on
// every connection the pool opens (synchronous=EXTRA: FULL does not sync
// the directory after the journal's deletion, so a power cut after a 200
// can roll the order back; docs/crash.md), and makes every transaction
// take the write lock up front so a read-then-write never fails half-way
// with SQLITE_BUSY.
func dsn(abs string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(DELETE)")
	q.Add("_pragma", "synchronous(EXTRA)")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}
	return u.String()
}

// checkSettings reads the connection settings back, because a PRAGMA that
// SQLite silently ignores would otherwise void the durability argument.
func checkSettings(db *sql.DB, busy time.Duration) error {
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return dbError("read journal_mode", err)
	}
	if !strings.EqualFold(mode, "delete") {
		return fmt.Errorf("journal_mode is %q, want delete", mode)
	}
	var syncMode int
	if err := db.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil {
		return dbError("read synchronous", err)
	}
	if syncMode != 3 {
		return fmt.Errorf("synchronous is %d, want 3 (EXTRA)", syncMode)
	}
	var ms int64
	if err := db.QueryRow("PRAGMA busy_timeout").Scan(&ms); err != nil {
		return dbError("read busy_timeout", err)
	}
	if ms != busy.Milliseconds() {
		return fmt.Errorf("busy_timeout is %d ms, want %d", ms, busy.Milliseconds())
	}
	return nil
}

// initSchema creates the tables in a file that has none, accepts a file that
// is already a receiver database of this version, and refuses anything else.
func initSchema(db *sql.DB) (err error) {
	tx, err := db.Begin()
	if err != nil {
		return dbError("begin init", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var appID, version, objects int64
	if err := tx.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		return dbError("read application_id", err)
	}
	if err := tx.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return dbError("read user_version", err)
	}
	if err := tx.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return dbError("read schema", err)
	}
	switch {
	case appID == applicationID && version == schemaVersion:
		return dbError("commit init", tx.Commit())
	case appID != 0 || version != 0 || objects != 0:
		return fmt.Errorf("%w: application_id %#x, user_version %d, %d schema objects",
			ErrNotDatabase, appID, version, objects)
	}
	if _, err := tx.Exec(schemaSQL); err != nil {
		return dbError("create schema", err)
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return dbError("set application_id", err)
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return dbError("set user_version", err)
	}
	return dbError("commit init", tx.Commit())
}

// dbError wraps err tersely and tags SQLite's busy and not-a-database codes
// with the sentinels callers map to exit codes.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s: %w: %w", op, ErrBusy, err)
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("%s: %w: %w", op, ErrNotDatabase, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ReleaseHeld ends every held response, now and from now on, by dropping its
// connection as a killed process would. Register it with
// http.Server.RegisterOnShutdown, or Shutdown waits for held responses forever.
func (r *Receiver) ReleaseHeld() {
	r.quitOnce.Do(func() { close(r.quit) })
}

// Close releases held responses and closes the database. Call it after the
// http.Server has stopped, so no handler meets a closed database.
func (r *Receiver) Close() error {
	r.ReleaseHeld()
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// outcome is what recording one order did.
type outcome int

const (
	applied outcome = iota
	duplicate
	conflict
)

// record counts the request and, for a new id, inserts the order and adds its
// qty to stock, all in one immediate transaction: either the id, the stock
// effect and the request count are on disk together, or none is.
func (r *Receiver) record(ctx context.Context, o Order, atMS int64) (res outcome, stock, prevQty int64, err error) {
	// BEGIN SOLUTION apply: in one immediate transaction count the request and, for a new id, insert the order and add its qty to stock; same id and qty is a duplicate, another qty a conflict (CONTRACT.md §5)
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, 0, dbError("begin", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err := countIn(ctx, tx, o.ID); err != nil {
		return 0, 0, 0, err
	}
	err = tx.QueryRowContext(ctx, "SELECT qty FROM orders WHERE id = ?", o.ID).Scan(&prevQty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		res = applied
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO orders (id, qty, token, at_ms) VALUES (?, ?, ?, ?)",
			o.ID, o.Qty, o.Token, atMS); err != nil {
			return 0, 0, 0, dbError("insert order", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE stock SET qty = qty + ? WHERE one = 1", o.Qty); err != nil {
			return 0, 0, 0, dbError("add stock", err)
		}
	case err != nil:
		return 0, 0, 0, dbError("read order", err)
	case prevQty == o.Qty:
		res = duplicate
	default:
		res = conflict
	}
	if err := tx.QueryRowContext(ctx, "SELECT qty FROM stock WHERE one = 1").Scan(&stock); err != nil {
		return 0, 0, 0, dbError("read stock", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, 0, dbError("commit order", err)
	}
	return res, stock, prevQty, nil
	// END SOLUTION apply
	// STARTER: return 0, 0, 0, fmt.Errorf("record order: %w (receiver/receiver.go: record)", ErrNotImplemented)
}

// countRequest durably counts one request for id that changes nothing else.
func (r *Receiver) countRequest(ctx context.Context, id string) (err error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return dbError("begin", err)
	}
	if err := countIn(ctx, tx, id); err != nil {
		tx.Rollback()
		return err
	}
	return dbError("commit request", tx.Commit())
}

func countIn(ctx context.Context, tx *sql.Tx, id string) error {
	_, err := tx.ExecContext(ctx,
		"INSERT INTO requests (id, n) VALUES (?, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1", id)
	return dbError("count request", err)
}

// stockView is the GET /stock answer.
type stockView struct {
	Stock    int64            `json:"stock"`
	Orders   int64            `json:"orders"`
	Requests map[string]int64 `json:"requests"`
}

// stock reads a consistent snapshot of the totals.
func (r *Receiver) stock(ctx context.Context) (v stockView, err error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return v, dbError("begin", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "SELECT qty FROM stock WHERE one = 1").Scan(&v.Stock); err != nil {
		return v, dbError("read stock", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&v.Orders); err != nil {
		return v, dbError("count orders", err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, n FROM requests ORDER BY id")
	if err != nil {
		return v, dbError("read requests", err)
	}
	defer rows.Close()
	v.Requests = map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return v, dbError("read requests", err)
		}
		v.Requests[id] = n
	}
	return v, dbError("read requests", rows.Err())
}

// orderView is the GET /orders/{id} answer.
type orderView struct {
	ID       string `json:"id"`
	Qty      int64  `json:"qty"`
	Token    int64  `json:"token"`
	Requests int64  `json:"requests"`
}

// order reads one order; found is false when the id was never applied.
func (r *Receiver) order(ctx context.Context, id string) (v orderView, found bool, err error) {
	err = r.db.QueryRowContext(ctx,
		`SELECT o.id, o.qty, o.token, coalesce(q.n, 0)
		   FROM orders o LEFT JOIN requests q ON q.id = o.id
		  WHERE o.id = ?`, id).Scan(&v.ID, &v.Qty, &v.Token, &v.Requests)
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	if err != nil {
		return v, false, dbError("read order", err)
	}
	return v, true, nil
}
