package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"snacklab/labsteps/result"
)

// PostTogether posts body to URL+path n times at once: it opens n
// connections, sends every request but the body's last byte, and then sends
// the n last bytes together, so the server has n requests in hand before any
// can be completed. When lockPath is not "", the harness holds that SQLite
// file's exclusive lock from before the first connection until the kernel
// says the server has read every request (at most a second), so that each
// request waits at its first use of the file and any interleaving of them is
// possible. The lock is taken first because taking it is slow (a helper
// process under the judged identity, on a loaded grader): taken between the
// first bytes and the last, it would hold every client unfinished for that
// long, which a receiver may cut at one second (CONTRACT §5.bounds). Each
// answer's Held says how long its client was held before its last byte. It
// returns the answers in connection order.
func (h *Harness) PostTogether(url, path, body string, n int, lockPath string) []HTTPAnswer {
	addr := strings.TrimPrefix(url, "http://")
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		path, addr, len(body))
	var lock *DBLock
	if lockPath != "" {
		lock = h.HoldExclusive(lockPath)
	}
	t := h.openTogether(addr, head+body[:len(body)-1], n)
	for i, err := range t.errs {
		if err == nil {
			continue
		}
		t.closeAll()
		if lock != nil {
			lock.Release()
		}
		what, why := fmt.Sprintf("open %d connections to %s", n, addr), "the receiver must take many requests at once"
		if WaitedOut(err) {
			h.Timeout(what, "every connection accepted within "+h.WaitLimit.String(), fmt.Sprintf("connection %d: %v", i+1, err), why)
		}
		h.Fatalf(what, "every connection accepted", why, "connection %d: %v", i+1, err)
	}
	h.Action(fmt.Sprintf("%d connections each hold a POST %s %s but its last byte; now all last bytes at once", n, path, body), result.NoClock)
	answers := h.sendLastBytes(t, body[len(body)-1:])
	if lock != nil {
		if !waitRead(t.ports, time.Second) {
			h.Narrate("note: the receiver had not read all %d requests after 1s (it may read one at a time); releasing the lock", n)
		}
		lock.Release()
	}
	h.readAnswersTogether(t, answers)
	t.closeAll()
	return answers
}

// together is PostTogether's n connections, each holding a request but
// its last byte.
type together struct {
	conns  []net.Conn
	ports  []int       // each connection's local port
	opened []time.Time // when each began to be opened
	errs   []error     // why each could not be opened or written
	held   []time.Duration
}

// openTogether opens n connections to addr at once and writes first on
// each: each is held unfinished from its opening until its last byte, so
// opening them one after the other would hold the first for the time of
// all the others' openings.
func (h *Harness) openTogether(addr, first string, n int) *together {
	t := &together{conns: make([]net.Conn, n), ports: make([]int, n), opened: make([]time.Time, n),
		errs: make([]error, n), held: make([]time.Duration, n)}
	var opening sync.WaitGroup
	for i := range t.conns {
		opening.Go(func() {
			t.opened[i] = time.Now()
			c, err := net.DialTimeout("tcp", addr, h.WaitLimit)
			if err == nil {
				c.SetDeadline(time.Now().Add(h.WaitLimit))
				t.ports[i] = c.LocalAddr().(*net.TCPAddr).Port
				t.conns[i] = c
				_, err = io.WriteString(c, first)
			}
			t.errs[i] = err
		})
	}
	opening.Wait()
	return t
}

// closeAll closes every connection that was opened.
func (t *together) closeAll() {
	for _, c := range t.conns {
		if c != nil {
			c.Close()
		}
	}
}

// sendLastBytes writes last on every connection and notes how long each
// was held. One goroutine writes every last byte, back to back: n
// goroutines woken together would spread the arrivals over the scheduler's
// whims. A write that failed is that connection's answer.
func (h *Harness) sendLastBytes(t *together, last string) []HTTPAnswer {
	answers := make([]HTTPAnswer, len(t.conns))
	for i, c := range t.conns {
		c.SetDeadline(time.Now().Add(h.WaitLimit))
		_, err := io.WriteString(c, last)
		t.held[i] = time.Since(t.opened[i])
		if err != nil {
			answers[i] = HTTPAnswer{Err: err, Held: t.held[i]}
		}
	}
	return answers
}

// readAnswersTogether reads every connection's answer into answers. A
// receiver may answer them one after the other, each after a commit that a
// busy disk makes slow: the wait is for progress, WaitLimit for each next
// answer, not for all of them.
func (h *Harness) readAnswersTogether(t *together, answers []HTTPAnswer) {
	n := len(t.conns)
	done := make(chan struct{}, n)
	var cut atomic.Bool // set before the lab closes what it stopped waiting for
	for i, c := range t.conns {
		c.SetDeadline(time.Time{})
		go func() {
			defer func() { done <- struct{}{} }()
			if answers[i].Err != nil {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil && cut.Load() {
				err = fmt.Errorf("%w: %w", ErrWaitedOut, err)
			}
			if err != nil {
				answers[i] = HTTPAnswer{Err: err, Held: t.held[i]}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil && cut.Load() {
				err = fmt.Errorf("%w: %w", ErrWaitedOut, err)
			}
			answers[i] = HTTPAnswer{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)), Err: err, Held: t.held[i]}
		}()
	}
	timer := time.NewTimer(h.WaitLimit)
	defer timer.Stop()
	for got := 0; got < n; {
		select {
		case <-done:
			got++
			timer.Reset(h.WaitLimit)
			continue
		case <-timer.C:
		case <-h.ctx.Done():
		}
		cut.Store(true)
		t.closeAll() // no answer for WaitLimit: the rest fail with a closed connection, as waited out
		for ; got < n; got++ {
			<-done
		}
	}
}

// waitRead waits, at most limit, until the peer of every loopback
// connection whose local port is in ports has read all that was sent to it,
// as the kernel's socket table says (/proc/net/tcp: the receive queue of the
// socket whose remote port is ours). It reports whether that happened; the
// caller must never fail a step on false, since a server may rightly read
// a request only when it is ready to serve it.
func waitRead(ports []int, limit time.Duration) bool {
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	end := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile("/proc/net/tcp"); err == nil {
			pending := len(want)
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) < 5 {
					continue
				}
				_, rport, ok := strings.Cut(f[2], ":")
				port, err := strconv.ParseInt(rport, 16, 32)
				if !ok || err != nil || !want[int(port)] {
					continue
				}
				if _, rx, _ := strings.Cut(f[4], ":"); strings.Trim(rx, "0") == "" {
					pending--
				}
			}
			if pending <= 0 {
				return true
			}
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond) // polling the kernel's table, not waiting for a process
	}
}

// DBLock is an SQLite file's lock held by the harness.
type DBLock struct {
	h    *Harness
	hand *SQLHand
}

// HoldExclusive takes SQLite's EXCLUSIVE lock on the file at path (BEGIN
// EXCLUSIVE, writing nothing): in a rollback-journal file no other process
// can read or write it until Release. The receiver's file is an SQLite file
// (CONTRACT §5); nothing here depends on its tables. The lock only sharpens
// a race, so a file that cannot be locked within a second (a receiver may
// keep its own exclusive lock) is narrated, not failed: it returns nil.
func (h *Harness) HoldExclusive(path string) *DBLock {
	hand, err := h.openSQL(h.ctx, SQLiteDSN(path, 1000))
	if err == nil {
		if err = hand.Exec(h.ctx, "BEGIN EXCLUSIVE"); err != nil {
			hand.Close()
		}
	}
	if err != nil {
		h.Narrate("note: the harness could not lock %s (%v); the requests race without it", path, err)
		return nil
	}
	h.Action("BEGIN EXCLUSIVE on "+filepath.Base(path)+": the harness holds the receiver's file lock", result.NoClock)
	l := &DBLock{h: h, hand: hand}
	h.OnCleanup(func() { // a step that failed before Release must not leave the file locked
		if l.hand != nil {
			l.hand.Close()
			l.hand = nil
		}
	})
	return l
}

// Release rolls the empty transaction back.
func (l *DBLock) Release() {
	if l == nil || l.hand == nil {
		return
	}
	err := l.hand.Exec(context.Background(), "ROLLBACK")
	l.hand.Close()
	l.hand = nil
	l.h.Action("ROLLBACK: the receiver's file lock released", result.NoClock)
	if err != nil {
		l.h.Fatalf("the harness releases the lock", "ROLLBACK succeeds", "", "%v", err)
	}
}
