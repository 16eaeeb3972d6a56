package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"snacklab/labsteps/result"
)

// WriteLock is the queue file's write lock, held by the harness in an
// immediate transaction that writes nothing.
type WriteLock struct {
	h    *Harness
	hand *SQLHand
	f    *os.File // for Digest; closed only after the lock is released
	// released is when Release began: a process's trace tells whether its
	// attempts came before it (refused by the harness) or after.
	released time.Time
}

// HoldWriteLock opens the queue file and runs BEGIN IMMEDIATE, taking SQLite's
// RESERVED lock: other processes can still read, but no one can start a write
// until Release. It never writes: the transaction is rolled back. (The lab
// touches the file through SQLHand, as the judged when there is one.)
func (h *Harness) HoldWriteLock() *WriteLock {
	why := "the harness holds the write lock to stop every writer at a known point"
	f, err := openNoFollow(h.DB)
	if err != nil {
		h.Fatalf("the harness opens the queue file", "a regular file", why, "%v", err)
	}
	hand, err := h.openSQL(h.ctx, queueDSN(h.DB))
	if err != nil {
		f.Close()
		if WaitedOut(err) {
			h.Timeout("the harness opens the queue file", "open", err.Error(), why)
		}
		h.Fatalf("the harness opens the queue file", "open", why, "%v", err)
	}
	if err := hand.Exec(h.ctx, "BEGIN IMMEDIATE"); err != nil {
		hand.Close()
		f.Close()
		if WaitedOut(err) {
			h.Timeout("the harness takes the write lock (BEGIN IMMEDIATE)", "the lock", err.Error(), why)
		}
		h.Fatalf("the harness takes the write lock (BEGIN IMMEDIATE)", "the lock", why, "%v", err)
	}
	h.Action("BEGIN IMMEDIATE: the harness holds the queue's write lock", result.NoClock)
	l := &WriteLock{h: h, hand: hand, f: f}
	h.OnCleanup(l.drop)
	return l
}

// queueDSN opens the queue file at path read-write (never creating it), with
// the contract's default busy timeout.
func queueDSN(path string) string { return SQLiteDSN(path, 5000) }

// MaxQueueFile is the most of a queue file the lab reads: a queue of the
// lab's steps is a few hundred KiB, and a program that leaves a 64 GiB
// sparse file at the queue's name must not have the judge read it.
const MaxQueueFile = 256 << 20

// ErrJudgedFile wraps every refusal of a file the programs left where the
// lab reads: what they planted is their failure, said with the reason.
var ErrJudgedFile = errors.New("a file the programs left cannot be read by the lab")

// openNoFollow opens path for reading when it is a regular file itself,
// not a link a program planted there to make the lab read one of its own
// files, nor a FIFO or device: O_NONBLOCK keeps the open of a FIFO with no
// writer from blocking the judge, and the file's type is checked on the
// open descriptor, so no swap between a check and the open can fool it.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrJudgedFile, filepath.Base(path))
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file (%v)", ErrJudgedFile, filepath.Base(path), fi.Mode().Type())
	}
	return f, nil
}

// ReadNoFollow reads a file of the programs' (the queue file) as
// os.ReadFile does, refusing a symlink, a FIFO or device planted at its
// name, and a file past MaxQueueFile (checked before reading, and again
// while reading, for a file that grows).
func ReadNoFollow(path string) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := fmt.Errorf("%w: %s is past the lab's cap of %d MiB", ErrJudgedFile, filepath.Base(path), MaxQueueFile>>20)
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxQueueFile {
		return nil, tooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxQueueFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxQueueFile {
		return nil, tooBig
	}
	return b, nil
}

// drop releases a lock the step left held (it failed while holding it),
// judging nothing: it runs when the step is already over.
func (l *WriteLock) drop() {
	if l.hand == nil {
		return
	}
	l.hand.Exec(context.Background(), "ROLLBACK")
	l.hand.Close()
	l.f.Close()
	l.hand = nil
}

// Release rolls the empty transaction back, letting the waiting writers go.
func (l *WriteLock) Release() {
	if l.hand == nil {
		return
	}
	l.released = time.Now()
	err := l.hand.Exec(context.Background(), "ROLLBACK")
	l.hand.Close()
	l.f.Close()
	l.hand = nil
	l.h.Action("ROLLBACK: write lock released", result.NoClock)
	if err != nil {
		l.h.Fatalf("the harness releases the write lock", "ROLLBACK succeeds", "", "%v", err)
	}
}

// cpuSample is what /proc says about a process at one instant.
type cpuSample struct {
	cpuNs    int64  // CPU time of all its threads, in ns
	sleeping bool   // every thread is in interruptible sleep (S)
	states   string // the thread states, for messages
}

// sampleProc reads /proc/PID/task/*/{stat,schedstat}.
func sampleProc(pid int) (cpuSample, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := os.ReadDir(dir)
	if err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{sleeping: true}
	var states strings.Builder
	for _, t := range tids {
		stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // the thread ended between ReadDir and here
		}
		// The command name is in parentheses and may hold spaces: the
		// fields that follow start after the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			return cpuSample{}, fmt.Errorf("odd %s/%s/stat", dir, t.Name())
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			return cpuSample{}, fmt.Errorf("odd %s/%s/stat", dir, t.Name())
		}
		state := f[0]
		states.WriteString(state)
		if state != "S" {
			s.sleeping = false
		}
		// schedstat's first field is the thread's time on a CPU in ns;
		// utime+stime (fields 14 and 15, in clock ticks) is the fallback.
		if ss, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat")); err == nil {
			if n, err := strconv.ParseInt(strings.Fields(string(ss))[0], 10, 64); err == nil {
				s.cpuNs += n
				continue
			}
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		s.cpuNs += (ut + st) * 10_000_000
	}
	s.states = states.String()
	return s, nil
}

// quietFor is how long every thread of a process must sleep without using any
// CPU before the harness takes it as blocked, and the poll interval.
const (
	quietFor  = 3 * time.Millisecond
	quietPoll = 500 * time.Microsecond
)

// WaitBlocked judges from idleness, which a slow starter defeats (it idles
// before it has even opened the file): the lab's own steps use
// Traced.WaitRefused, which judges from the lock calls the process made.
//
// WaitBlocked polls /proc until every process in procs has been asleep, all
// threads, with no CPU time used, for quietFor: it has done all it can and now
// waits (here: for the write lock the harness holds). It returns false, after
// noting it in the story, when that is not seen within limit.
func (h *Harness) WaitBlocked(limit time.Duration, procs ...*Proc) bool {
	deadline := time.Now().Add(limit)
	type track struct {
		last  cpuSample
		since time.Time
	}
	tr := make([]track, len(procs))
	ticker := time.NewTicker(quietPoll)
	defer ticker.Stop()
	for {
		now := time.Now()
		all := true
		for i, p := range procs {
			if ex, _, _ := p.Exited(); ex {
				continue // an ended process waits for nothing
			}
			s, err := sampleProc(p.Pid)
			if err != nil {
				// Gone from /proc: it has been reaped. Wait until its end is
				// recorded, so that the caller sees it exited rather than
				// mistaking it for a process that is waiting.
				p.waitFor(func() bool { return p.exited })
				continue
			}
			if !s.sleeping || s.cpuNs != tr[i].last.cpuNs {
				tr[i] = track{last: s, since: now}
				all = false
				continue
			}
			if now.Sub(tr[i].since) < quietFor {
				all = false
			}
		}
		if all {
			names := make([]string, len(procs))
			for i, p := range procs {
				names[i] = p.Name
			}
			h.Action(fmt.Sprintf("%s blocked: every thread asleep, no CPU used for %v", strings.Join(names, " and "), quietFor), result.NoClock)
			return true
		}
		if now.After(deadline) {
			var b strings.Builder
			for i, p := range procs {
				fmt.Fprintf(&b, " %s threads=%s cpu=%dns;", p.Name, tr[i].last.states, tr[i].last.cpuNs)
			}
			h.Narrate("harness: processes not seen blocked within %v:%s", limit, b.String())
			return false
		}
		select {
		case <-ticker.C:
		case <-h.ctx.Done():
			return false
		}
	}
}
