package labsteps

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Harness owns the world of one step: its directory, the executables under
// test, the processes it started and everything they printed.
type Harness struct {
	ctx    context.Context
	Dir    string // fresh work directory of this step
	LogDir string // per-process logs: NN-name.stdout / .stderr
	Bin    string // directory holding queuectl, sender, receiver
	DB     string // the queue file queuectl verbs use (Dir/queue.db unless changed)
	began  time.Time

	// WaitLimit bounds every single wait for a line, an exit or a state
	// (Limits.Wait unless a step changes it).
	WaitLimit time.Duration
	// Limits are this step's waits, derived from the run's calibration.
	Limits Limits

	closing atomic.Bool  // the step is over: cleanup's kills stay off the timeline
	commits atomic.Int64 // commits the step's processes made (counted from what they printed)
	waited  time.Duration

	parent *Harness // set for a part run by Parallel

	mu      sync.Mutex
	events  []Event
	checks  []Check
	narr    bytes.Buffer
	procs   []*Proc
	logs    []procLog
	undo    []func() // run by cleanup
	nproc   int
	section string
}

func newHarness(ctx context.Context, dir, bin string) *Harness {
	l := DeriveLimits(Calibration{}, 0, 0)
	return &Harness{ctx: ctx, Dir: dir, LogDir: filepath.Join(dir, "logs"), Bin: bin,
		DB: filepath.Join(dir, "queue.db"), began: time.Now(), WaitLimit: l.Wait, Limits: l}
}

// setLimits makes l the step's limits.
func (h *Harness) setLimits(l Limits) {
	h.Limits, h.WaitLimit = l, l.Wait
}

// top is the step's own harness, above any parts.
func (h *Harness) top() *Harness {
	for h.parent != nil {
		h = h.parent
	}
	return h
}

// Part is one independent variant of a step, for Parallel.
type Part struct {
	Name string
	Run  func(h *Harness)
}

// Parallel runs independent parts of a step at once, each in its own section
// with its own files, processes and story, and then merges their checks,
// timelines and stories in the order given, so the report reads as if they
// had run one after the other. A failed check in any part fails the step.
func (h *Harness) Parallel(parts ...Part) {
	subs := make([]*Harness, len(parts))
	panics := make([]any, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		sub := &Harness{ctx: h.ctx, Dir: h.Dir, LogDir: h.LogDir, Bin: h.Bin, DB: h.DB,
			began: h.began, WaitLimit: h.WaitLimit, Limits: h.Limits, parent: h}
		subs[i] = sub
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.cleanup()
			defer func() { panics[i] = recover() }()
			sub.Section(p.Name)
			p.Run(sub)
		}()
	}
	wg.Wait()
	h.mu.Lock()
	for _, sub := range subs {
		sub.mu.Lock()
		h.checks = append(h.checks, sub.checks...)
		h.events = append(h.events, sub.events...)
		h.narr.Write(sub.narr.Bytes())
		h.logs = append(h.logs, sub.logs...)
		h.waited += sub.waited
		sub.mu.Unlock()
		h.commits.Add(sub.commits.Load())
	}
	h.mu.Unlock()
	for _, p := range panics {
		if p == nil {
			continue
		}
		if _, ok := p.(stepFailed); !ok {
			panic(p)
		}
	}
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
}

// since is the real time elapsed in the step.
func (h *Harness) since() time.Duration { return time.Since(h.began) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// onCleanup registers f to run when the step (or part) ends.
func (h *Harness) onCleanup(f func()) {
	h.mu.Lock()
	h.undo = append(h.undo, f)
	h.mu.Unlock()
}

// cleanup ends every process the step left running.
func (h *Harness) cleanup() {
	h.closing.Store(true)
	defer func() {
		h.mu.Lock()
		undo := h.undo
		h.undo = nil
		h.mu.Unlock()
		for _, f := range undo {
			f()
		}
	}()
	h.mu.Lock()
	procs := append([]*Proc(nil), h.procs...)
	h.mu.Unlock()
	for _, p := range procs {
		if ex, _, _ := p.Exited(); !ex {
			p.cmd.Process.Signal(syscall.SIGKILL)
		}
		p.killGroup()
	}
	for _, p := range procs {
		p.waitDone(h.Limits.Drain)
	}
}
