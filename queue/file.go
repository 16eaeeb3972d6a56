package queue

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrate_1_2.sql
var migrate12SQL string

//go:embed migrate_2_3.sql
var migrate23SQL string

//go:embed migrate_3_4.sql
var migrate34SQL string

//go:embed migrate_4_5.sql
var migrate45SQL string

// version5 is schema.sql's part from "-- Version 5" on: what a version 4
// file lacks, taken from schema.sql so that a migrated file and a new one
// cannot differ.
var version5 = func() string {
	start := strings.Index(schemaSQL, "-- Version 5")
	if start < 0 {
		panic("queue: schema.sql no longer has its version 5 part")
	}
	return schemaSQL[start:]
}()

// jobsTable and jobsIndexes are schema.sql's definition of the jobs table and
// of its indexes and triggers, which migrate_3_4.sql rebuilds; taken from
// schema.sql so that a migrated file and a new one cannot differ.
var jobsTable, jobsIndexes = func() (string, string) {
	start := strings.Index(schemaSQL, "CREATE TABLE jobs (")
	end := strings.Index(schemaSQL, "-- One row per redrive")
	if start < 0 || end < start {
		panic("queue: schema.sql no longer defines the jobs table before the redrives")
	}
	def := schemaSQL[start:end]
	if v5 := strings.Index(def, "-- Version 5"); v5 >= 0 {
		def = def[:v5]
	}
	split := strings.Index(def, "WITHOUT ROWID;") + len("WITHOUT ROWID;")
	return def[:split], def[split:]
}()

// inspect looks at the file before SQLite does, so that what is plainly not
// a queue file is refused with a clear message and without SQLite touching
// it: a directory, a missing directory, another format, a file in WAL mode
// (SQLite would switch it or create -wal and -shm files beside it) or
// another application's mark. create allows a missing file.
func inspect(abs string, create bool) error {
	fi, err := os.Stat(abs)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: %s is a directory, not a queue file", ErrNotQueue, abs)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrNotQueue, abs)
	case errors.Is(err, os.ErrNotExist) && !create:
		return fmt.Errorf("%w (create it with `queuectl init`)", ErrMissing)
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		dir := filepath.Dir(abs)
		if di, derr := os.Stat(dir); derr != nil || !di.IsDir() {
			return fmt.Errorf("%w: directory %s does not exist (queuectl init creates the file, not its directory)", ErrMissing, dir)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %v", ErrMissing, err)
		}
		return nil
	case err != nil:
		return err
	}
	f, err := os.Open(abs)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	switch {
	case n == 0:
		return nil // empty: SQLite treats it as a new database; check decides
	case err != nil || !bytes.Equal(h[:16], []byte("SQLite format 3\x00")):
		return fmt.Errorf("%w: not a SQLite database", ErrNotQueue)
	case h[18] == 2 || h[19] == 2:
		return fmt.Errorf("%w: the file is in WAL mode; a queue file uses a rollback journal (journal_mode=DELETE). Nothing was changed", ErrNotQueue)
	}
	if id := binary.BigEndian.Uint32(h[68:72]); id != 0 && id != ApplicationID {
		return fmt.Errorf("%w: another application's SQLite file (application_id %#x, want %#x)", ErrNotQueue, id, ApplicationID)
	}
	return nil
}

// mark is what identifies a queue file.
type mark struct {
	appID   uint32
	version int
	objects int // rows of sqlite_schema
}

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readMark(ctx context.Context, db queryer) (mark, error) {
	var m mark
	var appID int64
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return m, classify(err)
	}
	m.appID = uint32(appID)
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&m.version); err != nil {
		return m, classify(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&m.objects); err != nil {
		return m, classify(err)
	}
	return m, nil
}

// tableColumns is what a queue file must hold: the tables of schema.sql and
// the columns this package reads, named by the db tags of the row's type (a
// field added to Job is a column checked here, with nothing else to edit).
// Not the JSON names: the contract names both, but a program that names a
// member wrong in its JSON answers has a wrong answer, not a foreign file.
// Extra tables, columns, indexes or triggers are allowed (the lab adds a
// trigger in step 5).
var tableColumns = map[string][]string{
	"jobs":           columns(Job{}),
	"redrives":       append([]string{"seq"}, columns(Redrive{})...),
	"investigations": append([]string{"seq"}, columns(Investigation{})...),
}

// columns are the db tags of a struct's fields, in order.
func columns(v any) []string {
	t := reflect.TypeOf(v)
	var names []string
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("db"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// checkTables refuses a file that lacks a table or column of the queue, so
// a foreign file is exit 5 "not a queue" rather than a later "no such table".
func checkTables(ctx context.Context, db queryer) error {
	for _, table := range []string{"jobs", "redrives", "investigations"} {
		rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
		if err != nil {
			return classify(err)
		}
		have := map[string]bool{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return classify(err)
			}
			have[name] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return classify(err)
		}
		if len(have) == 0 {
			return fmt.Errorf("%w: no table %s", ErrNotQueue, table)
		}
		for _, c := range tableColumns[table] {
			if !have[c] {
				return fmt.Errorf("%w: table %s has no column %s", ErrNotQueue, table, c)
			}
		}
	}
	return nil
}

// migrate brings a version 1, 2, 3 or 4 queue file to version 5 in one
// immediate transaction (an older file through each version between); a
// concurrent opener that did it first leaves nothing to do. Foreign keys are
// off on the connection while the jobs table is rebuilt and checked before
// the commit, as SQLite documents for changing a table.
func (q *Queue) migrate(ctx context.Context) error {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return classify(err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	// A user's view or trigger that reads jobs would make the rename of the
	// rebuilt table fail (SQLite checks every view and trigger against the
	// schema in between); the legacy rename leaves them naming jobs.
	if _, err := conn.ExecContext(ctx, "PRAGMA legacy_alter_table = ON"); err != nil {
		return classify(err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA legacy_alter_table = OFF")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback()
	m, err := readMark(ctx, tx)
	if err != nil {
		return err
	}
	if m.version == SchemaVersion && m.appID == ApplicationID {
		return nil
	}
	var steps []string
	switch {
	case m.version == 1 && m.appID == 0:
		steps = []string{migrate12SQL, migrate23SQL}
	case m.version == 2 && m.appID == ApplicationID:
		steps = []string{migrate23SQL}
	case m.version == 3 && m.appID == ApplicationID:
	case m.version == 4 && m.appID == ApplicationID:
	default:
		return fmt.Errorf("%w: schema version %d with application_id %#x changed while opening", ErrNotQueue, m.version, m.appID)
	}
	var user userObjects
	if m.version < 4 {
		// The rebuild keeps the user's indexes, triggers and columns on
		// jobs, or refuses naming them; never drops them silently.
		if user, err = findUserObjects(ctx, tx); err != nil {
			return err
		}
		steps = append(steps, user.rebuildSteps()...)
	}
	if err := checkVersion5Names(ctx, tx); err != nil {
		return err
	}
	steps = append(steps, version5, migrate45SQL)
	for i, step := range steps {
		if _, err := tx.ExecContext(ctx, step); err != nil {
			return fmt.Errorf("migrate schema %d to %d (step %d): %w", m.version, SchemaVersion, i+1, classify(err))
		}
	}
	if err := user.restore(ctx, tx); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return classify(err)
	}
	broken := rows.Next()
	rows.Close()
	if broken {
		return fmt.Errorf("migrate schema %d to %d: %w: a redrive or investigation names no job", m.version, SchemaVersion, ErrNotQueue)
	}
	return classify(tx.Commit())
}

// isHotJournal reports SQLITE_READONLY_ROLLBACK: a read-only connection
// found a crashed writer's journal that it may not roll back.
func isHotJournal(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_READONLY_ROLLBACK
}

// rollBackHotJournal opens the file writable, without changing any setting,
// and reads it, which makes SQLite roll the hot journal back: the file is
// restored to its last commit, exactly as the next writer would restore it.
func rollBackHotJournal(abs string, busy time.Duration) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=rw&_busy_timeout="+
		strconv.FormatInt(busy.Milliseconds(), 10))
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	return classify(db.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&n))
}
