package queue_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/queue"
)

// v3With writes a version 3 file with one pending job "k-1", its jobs
// table given extra column definitions, then runs extra SQL.
func v3With(t *testing.T, columns, extra string) string {
	t.Helper()
	schema, err := os.ReadFile("testdata/schema_v3.sql")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(schema), "    updated_at         INTEGER NOT NULL,",
		"    updated_at         INTEGER NOT NULL,"+columns, 1)
	path := filepath.Join(t.TempDir(), "v3.db")
	writeSchema(t, path, s+`
		INSERT INTO jobs (id, qty, max_attempts, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
		VALUES ('k-1', 7, 3, 100, 100100, 100000, 100, 100);`+extra)
	return path
}

func query(t *testing.T, path, q string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s sql.NullString
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s.String
}

// TestMigrationKeepsTheUsersObjects: the rebuild of jobs (version 3 to 4)
// keeps a user's views, triggers, indexes and extra columns.
func TestMigrationKeepsTheUsersObjects(t *testing.T) {
	for _, c := range []struct {
		name, columns, extra, check, want string
	}{
		{"a view reading jobs", "", `CREATE VIEW live AS SELECT id FROM jobs WHERE state = 'pending';`,
			`SELECT group_concat(id) FROM (SELECT id FROM live ORDER BY id)`, "k-1,v1-job"},
		{"a trigger on another table reading jobs", "", `CREATE TABLE notes (id TEXT, n INTEGER);
			CREATE TRIGGER notes_count AFTER INSERT ON notes BEGIN UPDATE notes SET n = (SELECT count(*) FROM jobs) WHERE id = NEW.id; END;`,
			`SELECT sql IS NOT NULL FROM sqlite_schema WHERE name = 'notes_count'`, "1"},
		{"a trigger on jobs", "", `CREATE TABLE seen (id TEXT);
			CREATE TRIGGER jobs_seen AFTER UPDATE OF state ON jobs BEGIN INSERT INTO seen VALUES (NEW.id); END;`,
			`SELECT sql FROM sqlite_schema WHERE name = 'jobs_seen' AND tbl_name = 'jobs'`,
			"CREATE TRIGGER jobs_seen AFTER UPDATE OF state ON jobs BEGIN INSERT INTO seen VALUES (NEW.id); END"},
		{"an index on jobs", "", `CREATE INDEX jobs_by_created ON jobs (created_at);`,
			`SELECT sql FROM sqlite_schema WHERE name = 'jobs_by_created' AND tbl_name = 'jobs'`,
			"CREATE INDEX jobs_by_created ON jobs (created_at)"},
		{"an extra column", "\n    ticket TEXT DEFAULT 'none',", `UPDATE jobs SET ticket = 'T-9';`,
			`SELECT ticket FROM jobs WHERE id = 'k-1'`, "T-9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := v3With(t, c.columns, c.extra)
			q, err := queue.Open(path, queue.Options{})
			if err != nil {
				t.Fatalf("writable Open: %v", err)
			}
			q.Close()
			if got, want := query(t, path, "PRAGMA user_version"), "5"; got != want {
				t.Fatalf("version %s, want %s", got, want)
			}
			if got := query(t, path, c.check); got != c.want {
				t.Errorf("%s = %q, want %q", c.check, got, c.want)
			}
		})
	}
}

// TestMigrationRefusesNamingWhatItCannotKeep: what the rebuild cannot keep
// is refused by name, and the file is left as it was.
func TestMigrationRefusesNamingWhatItCannotKeep(t *testing.T) {
	for _, c := range []struct {
		name, columns, extra, want string
	}{
		{"a generated column", "", `ALTER TABLE jobs ADD COLUMN double_qty INTEGER GENERATED ALWAYS AS (qty * 2) VIRTUAL;`,
			"double_qty (generated)"},
		{"a table named as a version 5 table", "", `CREATE TABLE attempts (n INTEGER);`, "table attempts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := v3With(t, c.columns, c.extra)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			q, err := queue.Open(path, queue.Options{})
			if err == nil {
				q.Close()
				t.Fatalf("writable Open migrated; want it refused naming %q", c.want)
			}
			if !errors.Is(err, queue.ErrNotQueue) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open error %v, want ErrNotQueue naming %q", err, c.want)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(before) {
				t.Errorf("the file changed although the migration was refused")
			}
		})
	}
}
