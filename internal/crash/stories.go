package crash

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"snacklab/labsteps/systrace"
)

// Programs are the story's programs, in the order the story runs them.
var Programs = []string{"enqueue", "sender", "receiver", "redrive", "finish"}

// The story's clock: enqueue at t0, everything after at later instants.
const (
	t0      = 1_000_000
	orderID = "o-1"
	qty     = 7
)

// story is one program of the order story: how to set the world up before
// it, how to run it, and what the world needs after it was killed.
type story struct {
	name string
	// what a person reads: "queuectl enqueue", …
	title string
	setup func(w *world) error
	// argv of the program under test; url is the receiver's, if up.
	argv func(w *world, url string) []string
	// reportDB is the file whose commit the program's answers report, and
	// report picks those answers out of the trace.
	reportDB func(w *world) string
	report   func(c systrace.Call) bool
	// after runs once the program ended (killed or not): what the story
	// does next before the drain (retry an enqueue the client was never
	// told about, re-run a redrive that did not happen).
	after func(w *world, r result) error
	// states lists the job states (or "absent") a kill may leave behind,
	// checked before anything else runs: the state the program found or
	// the one it promises, never a third (atomicity). nil: not checked
	// (run-once's claim, POST and finish are three operations).
	states []string
	// batch, above 0, is the batch story's size: a kill must leave its
	// jobs all in one state (batchStory).
	batch int
}

var stories = map[string]story{
	"enqueue": {
		title: "queuectl enqueue",
		setup: func(w *world) error { return nil },
		argv: func(w *world, _ string) []string {
			return []string{"queuectl", "enqueue", "--db", w.q, "--json", "--now-ms", ms(t0), "--id", orderID, "--qty", ms(qty)}
		},
		reportDB: func(w *world) string { return w.q },
		report:   systrace.ToStdout,
		states:   []string{"absent", "pending"},
		after: func(w *world, r result) error {
			w.mu.Lock()
			_, told := w.accepted[orderID]
			w.mu.Unlock()
			if told {
				return nil // the client has its acceptance and moves on
			}
			// The client was not told: it tries again, and must be told.
			again := w.queuectl("enqueue", t0+1, "--id", orderID, "--qty", ms(qty))
			if again.Code != 0 {
				return fmt.Errorf("retrying the enqueue after the crash: %s: %s", again, firstLine(again.Stderr))
			}
			return nil
		},
	},
	"sender": {
		title: "sender run-once (claim, POST, finish)",
		setup: func(w *world) error { return w.must(w.queuectl("enqueue", t0, "--id", orderID, "--qty", ms(qty))) },
		argv: func(w *world, url string) []string {
			return []string{"sender", "run-once", "--db", w.q, "--url", url, "--owner", "A", "--json", "--now-ms", ms(t0 + 1000)}
		},
		reportDB: func(w *world) string { return w.q },
		report:   systrace.ToStdout,
	},
	"receiver": {
		title: "receiver handling a POST",
		setup: func(w *world) error { return w.must(w.queuectl("enqueue", t0, "--id", orderID, "--qty", ms(qty))) },
		argv: func(w *world, _ string) []string {
			return []string{"receiver", "--db", w.r, "--addr", "127.0.0.1:0"}
		},
		reportDB: func(w *world) string { return w.r },
		report:   systrace.ToSocket,
	},
	"redrive": {
		title: "queuectl redrive",
		setup: func(w *world) error {
			return errors.Join(
				w.must(w.queuectl("enqueue", t0, "--id", orderID, "--qty", ms(qty), "--max-attempts", "1")),
				w.must(w.queuectl("claim", t0+1000, "--owner", "A")),
				w.must(w.queuectl("finish", t0+2000, "--id", orderID, "--token", "1", "--outcome", "permanent")))
		},
		argv: func(w *world, _ string) []string {
			return []string{"queuectl", "redrive", "--db", w.q, "--json", "--now-ms", ms(t0 + 3000), "--id", orderID, "--note", "T-1"}
		},
		reportDB: func(w *world) string { return w.q },
		report:   systrace.ToStdout,
		states:   []string{"dead", "pending"},
		after: func(w *world, r result) error {
			if r.Code == 0 {
				return nil
			}
			// The operator looks: still dead means the redrive did not
			// happen, and they run it again.
			show := w.queuectl("show", t0+3500, "--id", orderID)
			if strings.Contains(show.Stdout, `"state":"dead"`) {
				if again := w.queuectl("redrive", t0+4000, "--id", orderID, "--note", "T-2"); again.Code != 0 {
					return fmt.Errorf("re-running the redrive after the crash: %s: %s", again, firstLine(again.Stderr))
				}
			}
			return nil
		},
	},
	"finish": {
		title: "queuectl finish",
		setup: func(w *world) error {
			if err := w.must(w.queuectl("enqueue", t0, "--id", orderID, "--qty", ms(qty))); err != nil {
				return err
			}
			rc, err := w.startReceiver()
			if err != nil {
				return err
			}
			// Sender A delivers and dies before its finish (step 8's story).
			a := w.run("sender", "run-once", "--db", w.q, "--url", rc.URL, "--owner", "A", "--json",
				"--now-ms", ms(t0+1000), "--exit-after-receipt", "73")
			if a.Code != 73 {
				return fmt.Errorf("sender A with --exit-after-receipt 73: %s: %s", a, firstLine(a.Stderr))
			}
			return nil
		},
		argv: func(w *world, _ string) []string {
			return []string{"queuectl", "finish", "--db", w.q, "--json", "--now-ms", ms(t0 + 2000), "--id", orderID, "--token", "1", "--outcome", "ok"}
		},
		reportDB: func(w *world) string { return w.q },
		report:   systrace.ToStdout,
		states:   []string{"leased", "done"},
	},
}

// atomic checks that the killed program left the job in one of st.states.
// errUnreadable marks an atomic check that could not read the job at all:
// the reader failed on the files the crash left (a hot journal it did not
// roll back, say), which is InvRestart's judgement, not InvAtomic's.
var errUnreadable = errors.New("the file the crash left could not be read")

func (w *world) atomic(st story) error {
	if st.batch > 0 {
		return w.atomicBatch(st)
	}
	if st.states == nil {
		return nil
	}
	r := w.queuectl("show", t0+2500, "--id", orderID)
	state := "absent"
	if r.Code == 0 {
		var s shown
		if err := json.Unmarshal([]byte(firstLine(r.Stdout)), &s); err != nil {
			return fmt.Errorf("queuectl show after the crash printed %q: %v", firstLine(r.Stdout), err)
		}
		state = s.Job.State
	} else if r.Code != 8 {
		return fmt.Errorf("%w: queuectl show after the crash: %s: %s", errUnreadable, r, firstLine(r.Stderr))
	}
	if !slices.Contains(st.states, state) {
		return fmt.Errorf("after %s was killed, job %s is %s; a crash must leave it %s (the state before or after, never a third: one transaction)",
			st.title, orderID, state, strings.Join(st.states, " or "))
	}
	return nil
}

func (w *world) must(r result) error {
	if r.Code != 0 {
		return fmt.Errorf("setting up: %s: %s", r, firstLine(r.Stderr))
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// matcher says which calls are crash points in w: syncs, writes to the
// SQLite files, sends on a socket, and the journal's removal.
func (w *world) matcher() func(systrace.Site) bool {
	return func(s systrace.Site) bool {
		switch {
		case systrace.IsSync(s.Name):
			return true
		case systrace.IsWrite(s.Name):
			return strings.HasPrefix(s.Path, w.dir+"/") || strings.HasPrefix(s.Path, "socket:")
		default: // unlink, rename, truncate
			return strings.HasPrefix(s.Path, w.dir+"/")
		}
	}
}

// role names a call's file for people: "q.db-journal", "socket", "dir".
func (w *world) role(path string) string {
	switch {
	case strings.HasPrefix(path, "socket:"):
		return "socket"
	case path == w.dir:
		return "dir"
	case strings.HasPrefix(path, w.dir+"/"):
		return filepath.Base(path)
	case strings.HasPrefix(path, "pipe:"):
		return "pipe"
	case path == "":
		return "?"
	}
	return filepath.Base(path)
}

// traced runs the story's program killed at its n-th crash point (0: never)
// and returns what it printed and what the tracer saw. For the receiver it
// also runs the sender whose POST it handles, and stops it after.
func (w *world) traced(st story, n int) (result, systrace.Killed, error) {
	var url string
	if st.name != "receiver" {
		if w.recv == nil || !w.recv.alive() {
			rc, err := w.startReceiver()
			if err != nil {
				return result{}, systrace.Killed{}, err
			}
			url = rc.URL
		} else {
			url = w.recv.URL
		}
	}
	argv := st.argv(w, url)
	out, errf, err := w.logPair("traced-" + st.name)
	if err != nil {
		return result{}, systrace.Killed{}, err
	}
	defer errf.Close()
	// As the judged: the tracer stays the judge's, the judged-exec step it
	// starts drops to the judged before the program's exec.
	full, err := w.judged.TracedArgv(filepath.Join(w.bin, argv[0]))
	if err != nil {
		out.Close()
		return result{}, systrace.Killed{}, err
	}
	full = append(full, argv[1:]...)
	var stdout *os.File = out
	var pr *os.File
	if st.name == "receiver" {
		pr, stdout, err = os.Pipe()
		if err != nil {
			return result{}, systrace.Killed{}, err
		}
	}
	p, err := systrace.KillAt(full, systrace.KillOptions{Dir: w.cwd, Env: w.judged.Env(), Stdout: stdout, Stderr: errf, Match: w.matcher(), N: n})
	if st.name == "receiver" {
		stdout.Close()
	}
	if err != nil {
		out.Close()
		return result{}, systrace.Killed{}, err
	}
	if st.name == "receiver" {
		w.driveReceiver(p, pr, out)
	}
	k, err := p.Wait()
	out.Close()
	res := result{Argv: argv, Code: k.Code, Signal: k.Signal}
	res.StdoutFile, _ = filepath.EvalSymlinks(out.Name())
	b, _ := os.ReadFile(out.Name())
	res.Stdout = string(b)
	b, _ = os.ReadFile(errf.Name())
	res.Stderr = string(b)
	w.note(res)
	return res, k, err
}

// driveReceiver waits for the traced receiver's address, runs sender A
// against it, then stops the receiver (SIGTERM) if it still runs.
func (w *world) driveReceiver(p stoppable, pr, log *os.File) {
	lines := make(chan string, 1)
	go func() {
		defer pr.Close()
		buf := make([]byte, 64<<10)
		var acc []byte
		sent := false
		for {
			n, err := pr.Read(buf)
			acc = append(acc, buf[:n]...)
			log.Write(buf[:n])
			if i := strings.IndexByte(string(acc), '\n'); i >= 0 && !sent {
				lines <- string(acc[:i])
				sent = true
			}
			if err != nil {
				if !sent {
					close(lines)
				}
				return
			}
		}
	}()
	var first string
	select {
	case l, ok := <-lines:
		if !ok {
			return // died before announcing itself
		}
		first = l
	case <-p.Done():
		return
	case <-time.After(30 * time.Second):
		p.Signal(9)
		return
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(first), "listening on ")
	if ok {
		w.run("sender", "run-once", "--db", w.q, "--url", "http://"+addr, "--owner", "A", "--json", "--now-ms", ms(t0+1000))
	}
	p.Signal(15)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		p.Signal(9)
	}
}
