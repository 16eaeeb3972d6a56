package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
)

// SnapshotOptions pace a snapshot. A step that finds a writer committing is
// tried again after Pause, for as long as the queue's busy timeout. The zero value is the default.
type SnapshotOptions struct {
	// PagesPerStep is how many pages one step copies under the read lock
	// (0: 256, a megabyte of 4 KiB pages, a few milliseconds): a writer
	// that wants to commit waits at most one step.
	PagesPerStep int
	// Pause is the time between steps, the lock released (0: 1ms).
	Pause time.Duration
}

// SnapshotStats say what a snapshot took.
type SnapshotStats struct {
	Pages    int           // pages in the copy
	Steps    int           // steps taken, over every restart
	Restarts int           // times a writer's commit made the copy start over
	Busy     int           // steps that found a writer committing, tried again
	LongStep time.Duration // the longest step, its wait for a writer's commit included
}

// snapshotter is the modernc driver connection's backup API.
type snapshotter interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// Snapshot copies the file to dst (a path that must not exist) with SQLite's
// online backup, a few pages per step, releasing the read lock between
// steps, so that writers wait milliseconds at a time rather than for the
// whole copy. A commit by another process between two steps makes SQLite
// start the copy over; after a few restarts Snapshot instead reads the file
// at once under one read lock (copyUnderReadLock), so the copy always ends,
// and it is one consistent state of the file.
func (q *Queue) Snapshot(ctx context.Context, dst string, opts SnapshotOptions) (SnapshotStats, error) {
	var st SnapshotStats
	step := opts.PagesPerStep
	if step <= 0 {
		step = 256
	}
	pause := opts.Pause
	if pause <= 0 {
		pause = time.Millisecond
	}
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("snapshot: %w", classify(err))
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		s, ok := dc.(snapshotter)
		if !ok {
			return fmt.Errorf("the driver connection %T has no backup API", dc)
		}
		b, err := s.NewBackup("file:" + dst)
		if err != nil {
			return classify(err)
		}
		return q.steps(ctx, b, step, pause, &st)
	})
	conn.Close() // the one connection: the fallback needs it
	if errors.Is(err, errRestarted) {
		os.Remove(dst)
		err = q.copyUnderReadLock(ctx, dst, &st)
	}
	if err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	return st, nil
}

// steps runs the backup b to its end, step pages at a time with pause in
// between, counting into st; errRestarted after maxRestarts restarts.
func (q *Queue) steps(ctx context.Context, b *sqlite.Backup, step int, pause time.Duration, st *SnapshotStats) error {
	finished := false
	defer func() {
		if !finished {
			b.Finish()
		}
	}()
	remaining := -1
	var busySince time.Time
	for {
		start := time.Now()
		more, err := b.Step(int32(step))
		st.LongStep = max(st.LongStep, time.Since(start))
		st.Steps++
		if err != nil && errors.Is(classify(err), ErrBusy) {
			// A writer holds the file for its commit: SQLite says try
			// the step again later, and a later step sees the commit (as
			// a restart, counted below); for as long as the busy
			// timeout, counted from the first refusal.
			if busySince.IsZero() {
				busySince = time.Now()
			}
			if time.Since(busySince) < q.busyTimeout {
				st.Busy++
				err, more = nil, true
			}
		} else if err == nil {
			busySince = time.Time{}
		}
		if err != nil {
			return classify(err)
		}
		if !more {
			st.Pages = b.PageCount()
			finished = true
			return classify(b.Finish())
		}
		if r := b.Remaining(); remaining >= 0 && r > remaining {
			st.Restarts++
			if st.Restarts > maxRestarts {
				return errRestarted // writers keep committing: copy at once instead
			}
		}
		remaining = b.Remaining()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// maxRestarts is how many times the stepped copy starts over before
// Snapshot copies the file at once instead.
const maxRestarts = 3

var errRestarted = errors.New("restarted too often")

// copyUnderReadLock reads the whole file within one read transaction, whose
// shared lock keeps every writer from committing, so the bytes are one
// consistent state. Writers wait for that read, so it is made as short as
// it can be: the file is first read once without the lock, into the buffer
// the locked read then fills again, so that under the lock the bytes come
// from the page cache into memory already faulted in (a memory copy, about
// 30 ms for 66 MB here, instead of a disk read of up to a second). The
// unlocked read is never used: only what the locked read copies is the
// snapshot. It is the stepped copy's fallback when writers commit between
// its steps faster than it can finish.
func (q *Queue) copyUnderReadLock(ctx context.Context, dst string, st *SnapshotStats) error {
	f, err := os.Open(q.abs)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, fi.Size()+1<<20) // room for a few commits' growth
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	_ = n // warmed only: the page cache and buf's pages
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback()
	var pages, pageSize int64
	if err := tx.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return classify(err) // the shared lock is taken from here to the rollback
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return classify(err)
	}
	size := pages * pageSize // what SQLite reads as the database
	if size > int64(len(buf)) {
		buf = make([]byte, size) // grew since the warm read: a cold copy
	}
	start := time.Now()
	_, err = f.ReadAt(buf[:size], 0)
	tx.Rollback()
	st.LongStep = max(st.LongStep, time.Since(start))
	st.Steps++
	st.Pages = int(pages)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, buf[:size], 0o600)
}

// CheckSnapshot runs Check on a snapshot of the file (Snapshot, into a
// temporary directory removed afterwards), so that a check of a large file
// holds the read lock only for each step of the copy, never for the
// integrity check itself.
func (q *Queue) CheckSnapshot(ctx context.Context, max int, opts SnapshotOptions) (problems []Problem, total int, st SnapshotStats, err error) {
	dir, err := os.MkdirTemp("", "snacklab-check-")
	if err != nil {
		return nil, 0, st, fmt.Errorf("check: %w", err)
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, "snapshot.db")
	if st, err = q.Snapshot(ctx, copyPath, opts); err != nil {
		return nil, 0, st, fmt.Errorf("check: %w", err)
	}
	snap, err := Open(copyPath, Options{ReadOnly: true})
	if err != nil {
		return nil, 0, st, fmt.Errorf("check: open the snapshot: %w", err)
	}
	defer snap.Close()
	problems, total, err = snap.Check(ctx, max)
	return problems, total, st, err
}
