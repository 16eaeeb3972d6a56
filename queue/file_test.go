package queue_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/queue"
)

// writeV1 makes a version 1 queue file as the first release did: the
// tables and indexes of version 2, user_version 1, no application_id; with
// one job in it.
func writeV1(t *testing.T, path string) {
	t.Helper()
	schema, err := os.ReadFile("testdata/schema_v2.sql")
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Replace(string(schema), "PRAGMA application_id = 1936616305;\nPRAGMA user_version = 2;", "PRAGMA user_version = 1;", 1)
	if v1 == string(schema) {
		t.Fatal("testdata/schema_v2.sql no longer ends with the version 2 pragmas")
	}
	writeSchema(t, path, v1)
}

// writeV2 makes a version 2 queue file as the second release did, with one job.
func writeV2(t *testing.T, path string) {
	t.Helper()
	schema, err := os.ReadFile("testdata/schema_v2.sql")
	if err != nil {
		t.Fatal(err)
	}
	writeSchema(t, path, string(schema))
}

// writeV3 makes a version 3 queue file as the third release did (a rowid
// jobs table without closed_at), with one job.
func writeV3(t *testing.T, path string) {
	t.Helper()
	schema, err := os.ReadFile("testdata/schema_v3.sql")
	if err != nil {
		t.Fatal(err)
	}
	writeSchema(t, path, string(schema))
}

func writeSchema(t *testing.T, path, schema string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_journal_mode=DELETE")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO jobs (id, qty, max_attempts, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
		VALUES ('v1-job', 7, 5, 1000, 2000, 1000, 1000, 1000)`); err != nil {
		t.Fatal(err)
	}
	// A dead job, looked at, and a done one that was redriven once: the rows
	// that name a job must survive a rebuild of the jobs table.
	if _, err := db.Exec(`INSERT INTO jobs (id, qty, state, reason, attempts, max_attempts, token,
		    available_at, deadline_at, deadline_window_ms, created_at, updated_at)
		VALUES ('v1-dead', 3, 'dead', 'permanent', 1, 5, 1, 900, 1900, 1000, 900, 950),
		       ('v1-done', 4, 'done', NULL, 1, 5, 2, 800, 1800, 1000, 700, 850);
		INSERT INTO investigations (job_id, at_ms, note) VALUES ('v1-dead', 960, 'looked');
		INSERT INTO redrives (job_id, prev_token, prev_reason, at_ms, note) VALUES ('v1-done', 1, 'permanent', 800, 'again')`); err != nil {
		t.Fatal(err)
	}
}

// schemaOf is a file's schema as SQLite reads it: every column of every
// table, and every index and trigger with its definition.
func schemaOf(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRow(`SELECT group_concat(line, char(10)) FROM (
		    SELECT m.name || '.' || c.name || ' ' || c.type || ' notnull=' || c."notnull" || ' pk=' || c.pk AS line
		    FROM sqlite_schema m, pragma_table_xinfo(m.name) c WHERE m.type = 'table'
		    UNION ALL SELECT type || ' ' || name || ': ' || sql FROM sqlite_schema WHERE type IN ('index', 'trigger') AND sql IS NOT NULL
		    UNION ALL SELECT 'table ' || name || ' without rowid: ' || (sql LIKE '%WITHOUT ROWID%') FROM sqlite_schema WHERE type = 'table'
		    ORDER BY line)`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func mark(t *testing.T, path string) (appID, version int64) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	return appID, version
}

func TestVersion1IsReadAsItIsAndMarkedOnTheFirstWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	writeV1(t, path)
	before, _ := os.ReadFile(path)

	ro, err := queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of a version 1 file: %v", err)
	}
	if j, err := ro.Get(ctx, "v1-job"); err != nil || j.Qty != 7 {
		t.Fatalf("Get from version 1 = %+v, %v; want the job with qty 7", j, err)
	}
	ro.Close()
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a read-only open changed the version 1 file")
	}
	if id, v := mark(t, path); id != 0 || v != 1 {
		t.Fatalf("after a read-only open: application_id %#x version %d, want 0 and 1", id, v)
	}

	q, err := queue.Open(path, queue.Options{})
	if err != nil {
		t.Fatalf("writable Open of a version 1 file: %v", err)
	}
	if id, v := mark(t, path); id != queue.ApplicationID || v != queue.SchemaVersion {
		t.Fatalf("after a writable open: application_id %#x version %d, want %#x and %d", id, v, queue.ApplicationID, queue.SchemaVersion)
	}
	if j, err := q.Get(ctx, "v1-job"); err != nil || j.Qty != 7 {
		t.Fatalf("Get after the migration = %+v, %v; want the job kept", j, err)
	}
	q.Close()
	if q, err = queue.Open(path, queue.Options{}); err != nil {
		t.Fatalf("reopening the migrated file: %v", err)
	}
	q.Close()
}

// indexes lists the file's index names, sorted.
func indexes(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names string
	if err := db.QueryRow(`SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema
		WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name)`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestOlderVersionsMigrateToTheCurrentSchema: a version 1, 2 or 3 file is
// read as it is read-only, and the first writable open gives it exactly the
// schema of a new file, with every job and every row that names one kept
// (closed_at filled in for the done and dead ones) and the queue working.
func TestOlderVersionsMigrateToTheCurrentSchema(t *testing.T) {
	ctx := context.Background()
	fresh := filepath.Join(t.TempDir(), "new.db")
	q, err := queue.Open(fresh, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	want := schemaOf(t, fresh)
	for _, c := range []struct {
		name    string
		write   func(*testing.T, string)
		indexes string
	}{
		{"version 1", writeV1, "jobs_claim jobs_deadline jobs_lease sqlite_autoindex_jobs_1"},
		{"version 2", writeV2, "jobs_claim jobs_deadline jobs_lease sqlite_autoindex_jobs_1"},
		{"version 3", writeV3, "jobs_live jobs_pending_deadline sqlite_autoindex_jobs_1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			c.write(t, path)
			ro, err := queue.Open(path, queue.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			if j, err := ro.Get(ctx, "v1-job"); err != nil || j.Qty != 7 {
				t.Fatalf("read-only Get = %+v, %v; want the job with qty 7", j, err)
			}
			ro.Close()
			if got := indexes(t, path); got != c.indexes {
				t.Fatalf("indexes after a read-only open = %q, want %q (unchanged)", got, c.indexes)
			}
			q, err := queue.Open(path, queue.Options{})
			if err != nil {
				t.Fatalf("writable Open: %v", err)
			}
			defer q.Close()
			if got := schemaOf(t, path); got != want {
				t.Fatalf("schema after a writable open:\n%s\nwant that of a new file:\n%s", got, want)
			}
			if id, v := mark(t, path); id != queue.ApplicationID || v != queue.SchemaVersion {
				t.Fatalf("mark = %#x version %d, want %#x and %d", id, v, queue.ApplicationID, queue.SchemaVersion)
			}
			db, err := sql.Open("sqlite", path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var closed, rows string
			if err := db.QueryRow(`SELECT group_concat(id || '=' || coalesce(closed_at, 'NULL'), ' ')
				FROM (SELECT id, closed_at FROM jobs ORDER BY id)`).Scan(&closed); err != nil {
				t.Fatal(err)
			}
			if want := "v1-dead=950 v1-done=850 v1-job=NULL"; closed != want {
				t.Errorf("closed_at after the migration: %s, want %s", closed, want)
			}
			if err := db.QueryRow(`SELECT (SELECT group_concat(job_id) FROM redrives) || ' ' ||
				(SELECT group_concat(job_id) FROM investigations)`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if want := "v1-done v1-dead"; rows != want {
				t.Errorf("redrives and investigations after the migration name %q, want %q", rows, want)
			}
			j, ok, err := q.Claim(ctx, "A", 1000, 500)
			if err != nil || !ok || j.ID != "v1-job" || j.Token != 1 {
				t.Fatalf("Claim after the migration = %+v, %v, %v; want v1-job with token 1", j, ok, err)
			}
			if j, applied, err := q.Finish(ctx, j.ID, j.Token, queue.OutcomeOK, 1001); err != nil || !applied || j.State != queue.Done {
				t.Fatalf("Finish after the migration = %+v, %v, %v; want done", j, applied, err)
			}
			if j, _, err := q.Redrive(ctx, "v1-dead", "back", 1002); err != nil || j.State != queue.Pending {
				t.Fatalf("Redrive after the migration = %+v, %v; want pending", j, err)
			}
		})
	}
}

func TestReadOnlyNeverWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: "o-1", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 10}, 1); err != nil {
		t.Fatal(err)
	}
	q.Close()
	before, _ := os.ReadFile(path)
	ro, err := queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, _, err := ro.Enqueue(ctx, queue.NewJob{ID: "o-2", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 10}, 1); err == nil {
		t.Error("Enqueue through a read-only open succeeded, want an error")
	}
	if _, err := ro.Stats(ctx); err != nil {
		t.Errorf("Stats through a read-only open: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a read-only open changed the file")
	}
}

func TestCheckFindsBrokenInvariants(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: id, Qty: 1, MaxAttempts: 3, DeadlineWindowMs: 1000}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if p, n, err := q.Check(ctx, 10); err != nil || n != 0 {
		t.Fatalf("Check of a healthy file = %v, %d, %v; want no problems", p, n, err)
	}
	q.Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, s := range []string{
		"PRAGMA ignore_check_constraints = ON", "PRAGMA foreign_keys = OFF",
		"UPDATE jobs SET owner = 'X' WHERE id = 'a'",
		"UPDATE jobs SET reason = 'permanent' WHERE id = 'b'",
		"UPDATE jobs SET state = 'leased', owner = 'X', lease_until = 5, attempts = 2, token = 1 WHERE id = 'c'",
		"UPDATE jobs SET available_at = deadline_at WHERE id = 'd'",
		"DROP TRIGGER jobs_closed_update", // as in a file another program wrote
		"UPDATE jobs SET closed_at = 9 WHERE id = 'e'",
		"INSERT INTO redrives (job_id, prev_token, prev_reason, at_ms, note) VALUES ('ghost', 0, 'permanent', 1, 'T-1')",
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()

	q, err = queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	problems, total, err := q.Check(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Rule+" "+p.JobID)
	}
	for _, want := range []string{"lease-iff-leased a", "reason-iff-dead b", "token-covers-attempts c",
		"pending-before-deadline d", "closed-iff-done-or-dead e", "audit-points-at-job ghost"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("Check found %q, want it to include %q", got, want)
		}
	}
	if total != len(problems) {
		t.Errorf("total %d, listed %d: with no limit every problem is listed", total, len(problems))
	}
	if p, n, _ := q.Check(ctx, 2); len(p) != 2 || n < 3 {
		t.Errorf("Check(max 2) listed %d of %d, want 2 listed of at least 3", len(p), n)
	}
}

func TestOpenPathsThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		path   string
		create bool
		want   error
	}{
		{"a directory", dir, false, queue.ErrNotQueue},
		{"init on a directory", dir, true, queue.ErrNotQueue},
		{"init in a missing directory", filepath.Join(dir, "nodir", "q.db"), true, queue.ErrMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := queue.Open(tc.path, queue.Options{Create: tc.create}); !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
		})
	}
}

// crashEnv makes TestMain act as a writer that dies mid-commit.
const crashEnv = "SNACKLAB_QUEUE_TEST_CRASH_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashMidCommit(path)
		return
	}
	os.Exit(m.Run())
}

// crashMidCommit inserts enough rows to spill pages into the file under a
// rollback journal, then exits without committing: a hot journal is left.
func crashMidCommit(path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	for _, s := range []string{"PRAGMA cache_size = 1", "BEGIN IMMEDIATE"} {
		if _, err := db.Exec(s); err != nil {
			panic(err)
		}
	}
	for i := range 3000 {
		if _, err := db.Exec(`INSERT INTO jobs (id, qty, max_attempts, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
			VALUES (?, 1, 1, 1, 2, 1, 1, 1)`, fmt.Sprintf("z-%05d", i)); err != nil {
			panic(err)
		}
	}
	os.Exit(0)
}

func TestReadOnlyAfterACrashedWriterSeesTheLastCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: "kept", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 10}, 1); err != nil {
		t.Fatal(err)
	}
	q.Close()
	crash := exec.Command(os.Args[0])
	crash.Env = append(os.Environ(), crashEnv+"="+path)
	if out, err := crash.CombinedOutput(); err != nil {
		t.Fatalf("crashing writer: %v\n%s", err, out)
	}
	if fi, err := os.Stat(path + "-journal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no hot journal after the crash (stat %v); the test needs one", err)
	}
	ro, err := queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after a crashed writer: %v", err)
	}
	defer ro.Close()
	st, err := ro.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Counts[queue.Pending]; got != 1 {
		t.Fatalf("pending after the crash = %d, want 1: only the committed job", got)
	}
}

// TestClosedAtFollowsStateWithoutBeingSet: a statement that changes state
// and knows nothing of closed_at (a learner's) leaves the row as the
// reference's would, so the live indexes stay right: the job leaves them when
// it is done or dead and is back in them when it lives again.
func TestClosedAtFollowsStateWithoutBeingSet(t *testing.T) {
	q, path := openNew(t)
	enqueue(t, q, "a", 1, 3, 60_000, t0)
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct{ stmt, want string }{
		{"UPDATE jobs SET state = 'leased', owner = 'A', lease_until = 9, attempts = 1, token = 1, updated_at = 5 WHERE id = 'a'", "a leased NULL 1"},
		{"UPDATE jobs SET state = 'done', owner = NULL, lease_until = NULL, updated_at = 6 WHERE id = 'a'", "a done 6 0"},
		{"UPDATE jobs SET state = 'pending', updated_at = 7 WHERE id = 'a'", "a pending NULL 1"},
		{"UPDATE jobs SET closed_at = 3 WHERE id = 'a'", "a pending NULL 1"},
		{`INSERT INTO jobs (id, qty, state, reason, attempts, max_attempts, token, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
			VALUES ('b', 1, 'dead', 'permanent', 1, 3, 1, 1, 2, 1, 1, 8)`, "b dead 8 0"},
	} {
		if _, err := db.Exec(c.stmt); err != nil {
			t.Fatalf("%s: %v", c.stmt, err)
		}
		id := c.want[:1]
		var got string
		if err := db.QueryRow(`SELECT id || ' ' || state || ' ' || coalesce(closed_at, 'NULL') || ' ' ||
			(SELECT count(*) FROM jobs INDEXED BY jobs_open WHERE closed_at IS NULL AND available_at >= 0 AND id = ?1)
			FROM jobs WHERE id = ?1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("after %s:\n got %q, want %q (id state closed_at in-jobs_open)", c.stmt, got, c.want)
		}
	}
}
