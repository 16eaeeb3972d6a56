// Command peers measures snacklab's queue beside goqite and River (with
// riversqlite) in one process, on the same disk, with the same SQLite
// (modernc.org/sqlite), the same journal mode and synchronous=FULL, and
// prints every figure as a ratio to the raw one-row commit rate measured in
// the same turns. It lives in its own module so that the main module never
// depends on the peers. See docs/performance.md.
//
// Usage:
//
//	cd bench/peers && go run . [-jobs 1000] [-turn 100] [-journal delete] [-history 100000] [-batch 8,32,128] [-loop] [-dir DIR]
package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "embed"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"maragu.dev/goqite"
	_ "modernc.org/sqlite"

	"snacklab/queue"
)

const t0 = int64(1_700_000_000_000)

//go:embed goqite_schema.sql
var goqiteSchema string

// sample is one turn of one operation of one system.
type sample struct {
	ops     int
	elapsed time.Duration
	commits int64 // file change counter delta (header bytes 24-27), summed over the system's files
	written int64 // bytes this process handed to write(2) (/proc/self/io wchar)
}

func (s sample) rate() float64 { return float64(s.ops) / s.elapsed.Seconds() }

// system is one queue under test: its files and its two operations.
type system struct {
	name    string
	files   []string
	enqueue func(ctx context.Context, ids []string) error
	deliver func(ctx context.Context, n int) error // claim and finish ok n jobs
	close   func()
	queue   *queue.Queue  // snacklab's systems: the open queue
	untimed time.Duration // set by an operation: its tail that is not part of the measure (River's Stop)
	// perTurn is the jobs one turn enqueues and delivers (0: -turn); a
	// batched system delivers whole batches, so its turn is a multiple of N.
	perTurn int
	// lat collects, per delivered job, the time from the claim (fetch) that
	// took it to its completion's commit being reported.
	lat []time.Duration
}

// per is the jobs in one of s's turns.
func (s *system) per(turn int) int {
	if s.perTurn > 0 {
		return s.perTurn
	}
	return turn
}

func main() {
	jobs := flag.Int("jobs", 1000, "jobs per system")
	turn := flag.Int("turn", 100, "operations per turn; turns alternate between systems")
	journal := flag.String("journal", "delete", "journal mode for the raw floor, goqite and River (snacklab accepts only delete)")
	history := flag.Int("history", 100000, "done and dead jobs put in a second snacklab file to show the claim stays flat (0: skip)")
	loop := flag.Bool("loop", false, "add the loop-mode experiment: each finish committed with the next claim (not what sender run does)")
	batches := flag.String("batch", "8,32,128", "batch sizes of snacklab's batched delivery (ClaimBatch + FinishBatch) to measure, comma-separated (empty: none)")
	dir := flag.String("dir", "", "directory for the database files (default: a new temporary directory, removed after)")
	flag.Parse()
	log.SetFlags(0)
	if *jobs < *turn || *turn < 1 {
		log.Fatal("peers: want -jobs >= -turn >= 1")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "peers-")
		must(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	ctx := context.Background()
	mode := strings.ToLower(*journal)

	raw := newRaw(filepath.Join(*dir, "raw.db"), mode)
	systems := []*system{}
	if mode == "delete" {
		systems = append(systems, newSnacklab(filepath.Join(*dir, "snacklab.db"), "", 0))
	}
	systems = append(systems, newGoqite(filepath.Join(*dir, "goqite.db"), mode), newRiver(filepath.Join(*dir, "river.db"), mode))
	if mode == "delete" {
		systems = append(systems, newSnacklabBatches(*dir, *batches, *turn)...)
	}
	if mode == "delete" && *loop {
		systems = append(systems, newSnacklabLoop(filepath.Join(*dir, "snacklab-loop.db")))
	}
	if mode == "delete" && *history > 0 {
		systems = append(systems, newSnacklab(filepath.Join(*dir, "snacklab-history.db"), fmt.Sprintf("snacklab, %d done+dead in file", *history), *history))
	}
	defer func() {
		for _, s := range systems {
			s.close()
		}
		raw.close()
	}()

	turns := *jobs / *turn
	floor := map[string][]sample{}
	res := map[string]map[string][]sample{"enqueue": {}, "deliver": {}}
	measure := func(s *system, op func() error, ops int) sample {
		c0, w0 := commits(s.files), wchar()
		start := time.Now()
		must(op())
		el := time.Since(start) - s.untimed
		s.untimed = 0
		return sample{ops: ops, elapsed: el, commits: commits(s.files) - c0, written: wchar() - w0}
	}
	rawTurn := func(phase string, i int) sample {
		return measure(raw, func() error { return raw.enqueue(ctx, ids("r", phase, i, *turn)) }, *turn)
	}
	for _, phase := range []string{"enqueue", "deliver"} {
		for i := range turns {
			// The floor before and after each system's turn, so a change of
			// load during the turn shows in both.
			for k := range systems {
				s := systems[(k+i)%len(systems)] // rotate who goes first
				floor[phase+s.name] = append(floor[phase+s.name], rawTurn(phase, i*100+k))
				var smp sample
				per := s.per(*turn)
				if phase == "enqueue" {
					smp = measure(s, func() error { return s.enqueue(ctx, ids("o", "", i, per)) }, per)
				} else {
					smp = measure(s, func() error { return s.deliver(ctx, per) }, per)
				}
				res[phase][s.name] = append(res[phase][s.name], smp)
			}
		}
	}

	rawAll := append(floor["enqueue"+systems[0].name], floor["deliver"+systems[0].name]...)
	fmt.Printf("peers: %d jobs per system, turns of %d, journal_mode=%s, synchronous=FULL, modernc.org/sqlite; medians over %d turns\n",
		*jobs, *turn, mode, turns)
	fmt.Printf("raw one-row commit: %.0f commits/s (median), %.1f commits and %.1f pages written per commit\n\n",
		median(rawAll, sample.rate), median(rawAll, perOp(func(s sample) float64 { return float64(s.commits) })),
		median(rawAll, perOp(pages)))
	fmt.Printf("| operation | %s |\n|---|%s\n", strings.Join(names(systems), " | "), strings.Repeat("---|", len(systems)))
	row := func(label string, f func(name string) string) {
		cells := []string{}
		for _, s := range systems {
			cells = append(cells, f(s.name))
		}
		fmt.Printf("| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	ratio := func(phase, name string) string {
		r := []float64{}
		for i, s := range res[phase][name] {
			r = append(r, s.rate()/floor[phase+name][i].rate())
		}
		slices.Sort(r)
		return fmt.Sprintf("%.2f", r[len(r)/2])
	}
	for _, ph := range []struct{ phase, what string }{{"enqueue", "enqueue"}, {"deliver", "claim → finish ok"}} {
		row(ph.what+", per raw commit", func(n string) string { return ratio(ph.phase, n) })
		row(ph.what+", per second", func(n string) string { return fmt.Sprintf("%.0f", median(res[ph.phase][n], sample.rate)) })
		row(ph.what+", commits per job", func(n string) string {
			return fmt.Sprintf("%.2f", median(res[ph.phase][n], perOp(func(s sample) float64 { return float64(s.commits) })))
		})
		row(ph.what+", pages written per job", func(n string) string {
			return fmt.Sprintf("%.1f", median(res[ph.phase][n], perOp(pages)))
		})
	}
	rawRate := median(rawAll, sample.rate)
	row("claim → finish latency per job, median / p99 ms", func(n string) string {
		l := latencies(systems, n)
		if len(l) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f / %.1f", ms(l, 50), ms(l, 99))
	})
	row("claim → finish latency per job, median / p99 in raw commits", func(n string) string {
		l := latencies(systems, n)
		if len(l) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f / %.1f", ms(l, 50)*rawRate/1000, ms(l, 99)*rawRate/1000)
	})
	fmt.Println("\npages written = bytes handed to write(2) by this process (/proc/self/io wchar) / 4096: a page")
	fmt.Println("written to the journal and again to the database counts twice. commits = change of the")
	fmt.Println("database header's file change counter. River's turn starts its client (not timed before the")
	fmt.Println("first fetch) and ends at the 100th completion event; its completions are batched.")
	fmt.Println("latency = from the claim (River: the job's attempted_at, set by its fetch) to the completion's")
	fmt.Println("commit being reported (River: its completion event); a batch's jobs share their batch's.")
	fmt.Println("A batched system's turn is whole batches: the multiple of N at or above -turn.")
}

func names(ss []*system) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.name)
	}
	return out
}

func pages(s sample) float64 { return float64(s.written) / 4096 }

func perOp(f func(sample) float64) func(sample) float64 {
	return func(s sample) float64 { return f(s) / float64(s.ops) }
}

func median(ss []sample, f func(sample) float64) float64 {
	v := []float64{}
	for _, s := range ss {
		v = append(v, f(s))
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func ids(prefix, phase string, turn, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%s-%04d-%04d", prefix, phase, turn, i)
	}
	return out
}

// commits sums the file change counters (bytes 24-27 of the header) of files.
func commits(files []string) int64 {
	var n int64
	for _, f := range files {
		fh, err := os.Open(f)
		must(err)
		b := make([]byte, 4)
		_, err = fh.ReadAt(b, 24)
		fh.Close()
		must(err)
		n += int64(binary.BigEndian.Uint32(b))
	}
	return n
}

// wchar is the bytes this process has passed to write system calls.
func wchar() int64 {
	b, err := os.ReadFile("/proc/self/io")
	must(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			must(err)
			return n
		}
	}
	log.Fatal("peers: no wchar in /proc/self/io")
	return 0
}

func openDB(path, mode string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode("+mode+")&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	must(err)
	db.SetMaxOpenConns(1)
	return db
}

func newRaw(path, mode string) *system {
	db := openDB(path, mode)
	_, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
	must(err)
	return &system{name: "raw", files: []string{path},
		enqueue: func(ctx context.Context, ids []string) error {
			for _, id := range ids {
				if _, err := db.ExecContext(ctx, "INSERT INTO t (v) VALUES (?)", id); err != nil {
					return err
				}
			}
			return nil
		},
		close: func() { db.Close() }}
}

// newSnacklab opens a fresh snacklab queue; history puts that many done and
// dead jobs in it first, in one transaction.
func newSnacklab(path, name string, history int) *system {
	q, err := queue.Open(path, queue.Options{Create: true})
	must(err)
	if history > 0 {
		db := openDB(path, "delete")
		_, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?2)
			INSERT INTO jobs (id, qty, state, reason, attempts, max_attempts, token, available_at, deadline_at, deadline_window_ms, created_at, updated_at, closed_at)
			SELECT printf('h-%07d', i), 7, CASE i % 2 WHEN 0 THEN 'done' ELSE 'dead' END, CASE i % 2 WHEN 0 THEN NULL ELSE 'permanent' END,
			       1, 5, 1, ?1, ?1 + 3600000, 3600000, ?1, ?1, ?1 FROM n`, t0, history)
		must(err)
		db.Close()
	}
	if name == "" {
		name = "snacklab"
	}
	s := &system{}
	*s = system{name: name, files: []string{path}, queue: q,
		enqueue: func(ctx context.Context, ids []string) error {
			for _, id := range ids {
				if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: id, Qty: 7, MaxAttempts: 5, DeadlineWindowMs: 3_600_000}, t0); err != nil {
					return err
				}
			}
			return nil
		},
		deliver: func(ctx context.Context, n int) error {
			for range n {
				start := time.Now()
				j, ok, err := q.Claim(ctx, "bench", t0+1, 30_000)
				if err != nil || !ok {
					return fmt.Errorf("snacklab claim: ok=%v %v", ok, err)
				}
				if _, applied, err := q.Finish(ctx, j.ID, j.Token, queue.OutcomeOK, t0+1); err != nil || !applied {
					return fmt.Errorf("snacklab finish: applied=%v %v", applied, err)
				}
				s.lat = append(s.lat, time.Since(start))
			}
			return nil
		},
		close: func() { q.Close() }}
	return s
}

// newSnacklabLoop is the "loop mode" as an experiment, not the
// product: a worker that commits the finish of one job in the same
// immediate transaction as its next claim, one commit per job. Its
// statements are those of queue.go's Finish (ok) and Claim (the look for
// spent jobs, the grant), copied here because the queue has no such
// operation: sender run cannot use one and keep CONTRACT.md §4's event
// order (docs/performance.md). A job claimed at the end of a turn is
// finished in the next.
func newSnacklabLoop(path string) *system {
	s := newSnacklab(path, "snacklab loop mode (experiment)", 0)
	db := openDB(path, "delete")
	held := struct {
		id    string
		token int64
	}{}
	step := func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if held.id != "" {
			res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'done', reason = NULL,
				owner = NULL, lease_until = NULL, updated_at = ?3, closed_at = ?3
				WHERE id = ?1 AND state = 'leased' AND token = ?2`, held.id, held.token, t0+1)
			if n, _ := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("loop finish %s: %d rows, %v", held.id, n, err)
			}
		}
		var spent bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
			    WHERE closed_at IS NULL AND deadline_at <= ?1 AND (state = 'pending' OR lease_until <= ?1))
			OR EXISTS (SELECT 1 FROM jobs
			    WHERE closed_at IS NULL AND attempts >= max_attempts AND lease_until <= ?1)`, t0+1).Scan(&spent); err != nil || spent {
			return fmt.Errorf("loop look: spent=%v %v", spent, err)
		}
		if err := tx.QueryRowContext(ctx, `UPDATE jobs SET state = 'leased',
			owner = 'bench', lease_until = ?1 + 30000, attempts = attempts + 1, token = token + 1, updated_at = ?1
			WHERE id = (SELECT id FROM jobs
			            WHERE closed_at IS NULL AND available_at <= ?1 AND (state = 'pending' OR lease_until <= ?1)
			            ORDER BY available_at, id LIMIT 1)
			RETURNING id, token`, t0+1).Scan(&held.id, &held.token); err != nil {
			return fmt.Errorf("loop claim: %w", err)
		}
		return tx.Commit()
	}
	closeQueue := s.close
	s.deliver = func(ctx context.Context, n int) error {
		for range n {
			if err := step(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	s.close = func() { db.Close(); closeQueue() }
	return s
}

func newGoqite(path, mode string) *system {
	db := openDB(path, mode)
	_, err := db.Exec(goqiteSchema)
	must(err)
	q := goqite.New(goqite.NewOpts{DB: db, Name: "bench", Timeout: 30 * time.Second, MaxReceive: 5})
	s := &system{}
	*s = system{name: "goqite v0.4.0", files: []string{path},
		enqueue: func(ctx context.Context, ids []string) error {
			for _, id := range ids {
				if err := q.Send(ctx, goqite.Message{Body: []byte(`{"id":"` + id + `","qty":7}`)}); err != nil {
					return err
				}
			}
			return nil
		},
		deliver: func(ctx context.Context, n int) error {
			for range n {
				start := time.Now()
				m, err := q.Receive(ctx)
				if err != nil || m == nil {
					return fmt.Errorf("goqite receive: %v %v", m, err)
				}
				if err := q.Delete(ctx, m.ID); err != nil {
					return err
				}
				s.lat = append(s.lat, time.Since(start))
			}
			return nil
		},
		close: func() { db.Close() }}
	return s
}

// orderArgs is River's job: the same order as the others carry.
type orderArgs struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

func (orderArgs) Kind() string { return "order" }

type orderWorker struct {
	river.WorkerDefaults[orderArgs]
}

func (orderWorker) Work(context.Context, *river.Job[orderArgs]) error { return nil }

func newRiver(path, mode string) *system {
	ctx := context.Background()
	db := openDB(path, mode)
	// River runs its producer, completer and maintenance on separate
	// connections; one connection would starve them.
	db.SetMaxOpenConns(4)
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	must(err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	workers := river.NewWorkers()
	river.AddWorker(workers, orderWorker{})
	// Each turn's jobs go to a queue of their own, so that the client a
	// delivery turn starts works that turn's jobs only.
	enqTurn, delTurn := 0, 0
	queueOf := func(turn int) string { return fmt.Sprintf("turn%d", turn) }
	newClient := func(queue string) *river.Client[*sql.Tx] {
		c, err := river.NewClient(riversqlite.New(db), &river.Config{
			Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: 100}},
			Workers:           workers,
			FetchCooldown:     time.Millisecond,
			FetchPollInterval: 5 * time.Millisecond,
			Logger:            slog.New(slog.NewTextHandler(riverLog(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		must(err)
		return c
	}
	inserter := newClient(river.QueueDefault)
	s := &system{name: "River v0.51.2 + riversqlite", files: []string{path}}
	*s = system{name: s.name, files: s.files,
		enqueue: func(ctx context.Context, ids []string) error {
			for _, id := range ids {
				if _, err := inserter.Insert(ctx, orderArgs{ID: id, Qty: 7}, &river.InsertOpts{Queue: queueOf(enqTurn)}); err != nil {
					return err
				}
			}
			enqTurn++
			return nil
		},
		deliver: func(ctx context.Context, n int) error {
			c := newClient(queueOf(delTurn))
			delTurn++
			events, cancel := c.Subscribe(river.EventKindJobCompleted)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				return err
			}
			timeout := time.After(20 * time.Second)
			for got := 0; got < n; {
				select {
				case ev := <-events:
					got++
					if ev.Job.AttemptedAt != nil {
						s.lat = append(s.lat, time.Since(*ev.Job.AttemptedAt))
					}
				case <-timeout:
					var states string
					db.QueryRow("SELECT group_concat(state || ':' || queue || ':' || n) FROM (SELECT state, queue, count(*) n FROM river_job GROUP BY 1, 2)").Scan(&states)
					return fmt.Errorf("river: %d of %d jobs completed in 20s (jobs by state: %s)", got, n, states)
				}
			}
			// Not timed: the turn ends at the last completion.
			tail := time.Now()
			stop, done := context.WithTimeout(ctx, time.Minute)
			defer done()
			err := c.Stop(stop)
			s.untimed = time.Since(tail)
			return err
		},
		close: func() { db.Close() }}
	return s
}

func must(err error) {
	if err != nil {
		log.Fatal("peers: ", err)
	}
}

func riverLog() io.Writer {
	if os.Getenv("PEERS_RIVER_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
