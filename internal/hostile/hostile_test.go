package hostile_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"snacklab/internal/testbin"
	"snacklab/queue"
	"snacklab/receiver"
)

func TestMain(m *testing.M) { testbin.Main(m, "queuectl", "sender", "receiver") }

// fixtures makes the files the rows point at, in one directory.
func fixtures(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }

	// A healthy queue: a pending, a done and a dead job.
	q, err := queue.Open(at("q.db"), queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p-1", "d-1", "x-1"} {
		if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: id, Qty: 7, MaxAttempts: 3, DeadlineWindowMs: 100_000}, 1000); err != nil {
			t.Fatal(err)
		}
	}
	for _, outcome := range []queue.Outcome{queue.OutcomeOK, queue.OutcomePermanent} {
		j, ok, err := q.Claim(ctx, "A", 2000, 1000)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, _, err := q.Finish(ctx, j.ID, j.Token, outcome, 2000); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()

	raw := func(name string, stmts ...string) {
		t.Helper()
		db, err := sql.Open("sqlite", at(name))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %s: %v", name, s, err)
			}
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(at(from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(at(to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Another application's files.
	raw("foreign-v1.db", "CREATE TABLE t (x)", "PRAGMA user_version = 1")
	raw("foreign-jobs.db", "CREATE TABLE jobs (x)", "PRAGMA user_version = 1")
	raw("foreign-app.db", "PRAGMA application_id = 5", "CREATE TABLE jobs (x)")
	if err := os.WriteFile(at("garbage.db"), []byte(strings.Repeat("not sqlite ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := receiver.Open(at("receiver.db"), receiver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()

	// The healthy queue switched to WAL by someone else.
	copyFile("q.db", "wal.db")
	raw("wal.db", "PRAGMA journal_mode = WAL")

	// Rows the contract says cannot exist (the schema's CHECKs and foreign
	// keys switched off by hand).
	copyFile("q.db", "broken.db")
	raw("broken.db", "PRAGMA ignore_check_constraints = ON", "PRAGMA foreign_keys = OFF",
		"UPDATE jobs SET owner = 'A' WHERE id = 'd-1'",
		"INSERT INTO investigations (job_id, at_ms, note) VALUES ('ghost', 1, 'T-1')")

	// A damaged page: the integrity check fails.
	qc, err := queue.Open(at("corrupt.db"), queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		if _, _, err := qc.Enqueue(ctx, queue.NewJob{ID: fmt.Sprintf("c-%03d", i), Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1000}, 1); err != nil {
			t.Fatal(err)
		}
	}
	qc.Close()
	b, err := os.ReadFile(at("corrupt.db"))
	if err != nil {
		t.Fatal(err)
	}
	b[3*4096+1], b[3*4096+2] = 0xff, 0xff // page 4's first free block points past the page
	if err := os.WriteFile(at("corrupt.db"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := os.Mkdir(at("adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshot is every file under dir by name, with its bytes' hash.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got[strings.TrimPrefix(path, dir+"/")] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	return got
}

func diff(before, after map[string]string) string {
	var d []string
	for n, h := range before {
		switch a, ok := after[n]; {
		case !ok:
			d = append(d, n+" removed")
		case a != h:
			d = append(d, n+" changed")
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			d = append(d, n+" created")
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}

func TestHostileInputIsRefusedAndWritesNothing(t *testing.T) {
	dir := fixtures(t)
	at := func(name string) string { return filepath.Join(dir, name) }
	q := at("q.db")
	sender := func(db string, extra ...string) []string {
		return append([]string{"run-once", "--db", db, "--url", "http://127.0.0.1:9", "--owner", "A", "--now-ms", "5000"}, extra...)
	}
	rcv := func(db string, extra ...string) []string { return append([]string{"--db", db}, extra...) }

	type row struct {
		name, prog string
		args       []string
		code       int
		stderr     string // a piece of the one stderr line that names the problem
	}
	rows := []row{
		// Numbers with prefixes, separators, signs or spaces: usage (2).
		{"qty octal", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "010"}, 2, `invalid value "010" for flag -qty`},
		{"qty hex", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "0x10"}, 2, `"0x10"`},
		{"qty binary", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "0b11"}, 2, `"0b11"`},
		{"qty underscore", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "1_000"}, 2, `"1_000"`},
		{"qty plus", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "+7"}, 2, `"+7"`},
		{"qty space", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", " 7"}, 2, `" 7"`},
		{"qty minus zero", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "-0"}, 2, `"-0"`},
		{"qty word", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "seven"}, 2, `"seven"`},
		{"max-attempts hex", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "1", "--max-attempts", "0x5"}, 2, "-max-attempts"},
		{"deadline exponent", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "1", "--deadline-ms", "1e3"}, 2, "-deadline-ms"},
		{"token hex", "queuectl", []string{"finish", "--db", q, "--id", "p-1", "--token", "0x1", "--outcome", "ok"}, 2, `"0x1" for flag -token`},
		{"lease binary", "queuectl", []string{"claim", "--db", q, "--owner", "A", "--lease-ms", "0b1"}, 2, "-lease-ms"},
		{"now-ms underscore", "queuectl", []string{"claim", "--db", q, "--owner", "A", "--now-ms", "1_000"}, 2, "-now-ms"},
		{"busy octal", "queuectl", []string{"stats", "--db", q, "--busy-timeout-ms", "0100"}, 2, "-busy-timeout-ms"},
		{"attempt hex", "queuectl", []string{"backoff", "--id", "o-1", "--attempt", "0x2"}, 2, "-attempt"},
		{"limit plus", "queuectl", []string{"redrive", "--db", q, "--reason", "permanent", "--note", "T-1", "--rate", "1/s", "--limit", "+1"}, 2, "-limit"},
		{"max-dead hex", "queuectl", []string{"alerts", "--db", q, "--max-dead", "0x1"}, 2, "-max-dead"},
		{"check max octal", "queuectl", []string{"check", "--db", q, "--max", "010"}, 2, "-max"},
		{"sender lease octal", "sender", sender(q, "--lease-ms", "010"), 2, "-lease-ms"},
		{"sender timeout hex", "sender", sender(q, "--timeout-ms", "0x10"), 2, "-timeout-ms"},
		{"sender exit code plus", "sender", sender(q, "--exit-after-receipt", "+7"), 2, "-exit-after-receipt"},
		{"sender now underscore", "sender", sender(q, "--now-ms", "1_000"), 2, "-now-ms"},
		{"receiver fail-next octal", "receiver", rcv(at("r-new.db"), "--fail-next", "010"), 2, "-fail-next"},
		{"receiver hold-next hex", "receiver", rcv(at("r-new.db"), "--hold-next", "0x1"), 2, "-hold-next"},
		{"receiver busy space", "receiver", rcv(at("r-new.db"), "--busy-timeout-ms", " 5"), 2, "-busy-timeout-ms"},

		// Well-formed numbers outside their documented range: invalid (3).
		{"busy beyond a day", "queuectl", []string{"stats", "--db", q, "--busy-timeout-ms", "9223372036854775807"}, 3, "--busy-timeout-ms 9223372036854775807: want 0 to 86400000"},
		{"busy beyond int64", "queuectl", []string{"stats", "--db", q, "--busy-timeout-ms", "99999999999999999999"}, 3, "want 0 to 86400000"},
		{"now-ms negative", "queuectl", []string{"claim", "--db", q, "--owner", "A", "--now-ms", "-1"}, 3, "--now-ms -1"},
		{"now-ms beyond 2^53", "queuectl", []string{"claim", "--db", q, "--owner", "A", "--now-ms", "9007199254740992"}, 3, "--now-ms 9007199254740992"},
		{"qty zero", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "0"}, 3, "--qty 0"},
		{"qty beyond int64", "queuectl", []string{"enqueue", "--db", q, "--id", "n-1", "--qty", "9223372036854775808"}, 3, "--qty 9223372036854775808"},
		{"token negative", "queuectl", []string{"finish", "--db", q, "--id", "p-1", "--token", "-1", "--outcome", "ok"}, 3, "--token -1"},
		{"lease zero", "queuectl", []string{"claim", "--db", q, "--owner", "A", "--lease-ms", "0"}, 3, "--lease-ms 0"},
		{"rate 1e-300", "queuectl", []string{"redrive", "--db", q, "--reason", "permanent", "--note", "T-1", "--rate", "1e-300/s"}, 3, `rate "1e-300/s"`},
		{"rate below 1/h", "queuectl", []string{"redrive", "--db", q, "--reason", "permanent", "--note", "T-1", "--rate", "0.0001/s"}, 3, "at least 1/h"},
		{"rate hex float", "queuectl", []string{"redrive", "--db", q, "--reason", "permanent", "--note", "T-1", "--rate", "0x1p4/s"}, 3, `rate "0x1p4/s"`},
		{"sender busy beyond a day", "sender", sender(q, "--busy-timeout-ms", "9223372036854775807"), 3, "--busy-timeout-ms"},
		{"sender exit code 126", "sender", sender(q, "--exit-after-receipt", "126"), 3, "--exit-after-receipt 126"},
		{"sender timeout zero", "sender", sender(q, "--timeout-ms", "0"), 3, "--timeout-ms 0"},
		{"receiver addr nonsense", "receiver", rcv(at("r-new.db"), "--addr", "nonsense"), 3, `--addr "nonsense"`},
		{"receiver port too big", "receiver", rcv(at("r-new.db"), "--addr", "127.0.0.1:99999"), 3, "port"},
		{"receiver port hex", "receiver", rcv(at("r-new.db"), "--addr", "127.0.0.1:0x50"), 3, "port"},
		{"receiver busy beyond a day", "receiver", rcv(at("r-new.db"), "--busy-timeout-ms", "9223372036854775807"), 3, "--busy-timeout-ms"},
		{"receiver fail-next negative", "receiver", rcv(at("r-new.db"), "--fail-next", "-1"), 3, "--fail-next -1"},

		// An id that cannot exist is invalid, not "not found".
		{"show bad id", "queuectl", []string{"show", "--db", q, "--id", "bad id"}, 3, `id "bad id"`},

		// Paths that are not queue files.
		{"missing file", "queuectl", []string{"stats", "--db", at("nope.db")}, 4, "database file missing"},
		{"init in a missing directory", "queuectl", []string{"init", "--db", at("nodir/q.db")}, 4, "does not exist"},
		{"directory as --db", "queuectl", []string{"stats", "--db", at("adir")}, 5, "is a directory"},
		{"init on a directory", "queuectl", []string{"init", "--db", at("adir")}, 5, "is a directory"},
		{"sender missing file", "sender", sender(at("nope.db")), 4, "database file missing"},
		{"sender directory", "sender", sender(at("adir")), 5, "is a directory"},
		{"receiver directory", "receiver", rcv(at("adir")), 5, "is a directory"},
		{"receiver missing directory", "receiver", rcv(at("nodir/r.db")), 4, "does not exist"},

		// Files that are not (or not only) a queue: not a queue (5).
		{"garbage", "queuectl", []string{"stats", "--db", at("garbage.db")}, 5, "not a SQLite database"},
		{"foreign file, user_version 1", "queuectl", []string{"stats", "--db", at("foreign-v1.db")}, 5, "no table jobs"},
		{"foreign file, user_version 1, enqueue", "queuectl", []string{"enqueue", "--db", at("foreign-v1.db"), "--id", "n-1", "--qty", "1"}, 5, "no table jobs"},
		{"foreign jobs table", "queuectl", []string{"claim", "--db", at("foreign-jobs.db"), "--owner", "A"}, 5, "table jobs has no column id"},
		{"foreign application_id", "queuectl", []string{"stats", "--db", at("foreign-app.db")}, 5, "another application's SQLite file"},
		{"init on a foreign file", "queuectl", []string{"init", "--db", at("foreign-v1.db")}, 5, "no table jobs"},
		{"receiver's file as queue", "queuectl", []string{"enqueue", "--db", at("receiver.db"), "--id", "n-1", "--qty", "1"}, 5, "another application's SQLite file"},
		{"queue file as receiver's", "receiver", rcv(q), 5, "not a receiver database"},
		{"sender on a foreign file", "sender", sender(at("foreign-app.db")), 5, "another application's SQLite file"},

		// A queue in the wrong journal mode: refused, never rewritten.
		{"stats on WAL", "queuectl", []string{"stats", "--db", at("wal.db")}, 5, "WAL mode"},
		{"show on WAL", "queuectl", []string{"show", "--db", at("wal.db"), "--id", "p-1"}, 5, "WAL mode"},
		{"dead on WAL", "queuectl", []string{"dead", "--db", at("wal.db")}, 5, "WAL mode"},
		{"alerts on WAL", "queuectl", []string{"alerts", "--db", at("wal.db"), "--max-dead", "0"}, 5, "WAL mode"},
		{"check on WAL", "queuectl", []string{"check", "--db", at("wal.db")}, 5, "WAL mode"},
		{"enqueue on WAL", "queuectl", []string{"enqueue", "--db", at("wal.db"), "--id", "n-1", "--qty", "1"}, 5, "WAL mode"},
		{"sender on WAL", "sender", sender(at("wal.db")), 5, "WAL mode"},

		// Damage found by check, listed, exit 5.
		{"check a damaged file", "queuectl", []string{"check", "--db", at("corrupt.db")}, 5, "integrity"},
		{"check broken invariants", "queuectl", []string{"check", "--db", at("broken.db")}, 5, "lease-iff-leased: d-1"},
	}
	// The tests of cmd/* cover each program's own bad input further; these
	// are the cases issue 11 names, over every program.
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, dir)
			r := testbin.Run(t, tc.prog, tc.args...)
			if r.Code != tc.code {
				t.Errorf("exit = %d, want %d (stderr %q)", r.Code, tc.code, r.Stderr)
			}
			line := strings.TrimSuffix(r.Stderr, "\n")
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, tc.prog+": ") || !strings.Contains(line, tc.stderr) {
				t.Errorf("stderr = %q, want one line %q naming %q", r.Stderr, tc.prog+": …", tc.stderr)
			}
			if strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stdout, "goroutine ") {
				t.Errorf("panicked: %s", r.Stderr)
			}
			if d := diff(before, snapshot(t, dir)); d != "" {
				t.Errorf("a refused command touched files: %s", d)
			}
		})
	}
}
