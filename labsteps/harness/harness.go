package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"snacklab/labsteps/result"
)

// Harness owns the world of one step: its directory, the executables under
// test, the processes it started and everything they printed.
type Harness struct {
	ctx context.Context
	// Root is the step's directory, the judge's: lab.log, and Dir and
	// LogDir below it (MakeStepDirs).
	Root   string
	Dir    string // the programs' work directory (scratch): queue and receiver files
	LogDir string // the judge's alone: per-process logs NN-name.stdout / .stderr, traces
	// Judged is the identity the programs under test run as; nil: the
	// lab's own.
	Judged *Judged
	Bin    string // directory holding queuectl, sender, receiver
	DB     string // the queue file queuectl verbs use (Dir/queue.db unless changed)
	began  time.Time

	// WaitLimit bounds every single wait for a line, an exit or a state
	// (Limits.Wait unless a step changes it).
	WaitLimit time.Duration
	// Limits are this step's waits, derived from the run's calibration.
	Limits result.Limits

	closing atomic.Bool  // the step is over: cleanup's kills stay off the timeline
	commits atomic.Int64 // commits the step's processes made (counted from what they printed)
	waited  time.Duration

	parent *Harness // set for a part run by Parallel
	stop   *stopper // StopAt's rule, shared by the step's parts

	mu      sync.Mutex
	events  []result.Event
	checks  []result.Check
	narr    bytes.Buffer
	procs   []*Proc
	logs    []procLog
	undo    []func() // run by cleanup
	nproc   int
	section string
	clause  []string // the clause ids of the checks that follow (Clause)
	part    string   // the part this harness runs (Parallel); "" for the step's own
	parts   []string // the parts Parallel ran, in the order declared
}

// New is the harness of one step that works in dir with the executables in
// bin, within the limits l; ctx ends the step (its time limit). The
// programs run as the lab, in dir itself; NewStep separates them.
func New(ctx context.Context, dir, bin string, l result.Limits) *Harness {
	return &Harness{ctx: ctx, Root: dir, Dir: dir, LogDir: filepath.Join(dir, "logs"), Bin: bin,
		DB: filepath.Join(dir, "queue.db"), began: time.Now(), WaitLimit: l.Wait, Limits: l}
}

// NewStep is the harness of one step rooted at root, a new directory of
// the judge's: the programs run as j (nil: as the lab) in root/scratch, and
// the lab keeps its logs and traces in root/logs, out of their reach.
func NewStep(ctx context.Context, root, bin string, l result.Limits, j *Judged) (*Harness, error) {
	scratch, logs, err := MakeStepDirs(root, j)
	if err != nil {
		return nil, err
	}
	h := New(ctx, scratch, bin, l)
	h.Root, h.LogDir, h.Judged = root, logs, j
	return h, nil
}

// Do runs body as the step: its first failed check ends it, and every
// process it left running is ended afterwards. problem is "" unless the
// harness itself went wrong (a panic that is not a failed check).
func (h *Harness) Do(body func(*Harness)) (problem string) {
	defer h.cleanup()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stepFailed); !ok {
				problem = fmt.Sprintf("lab harness panic: %v\n%s", r, debug.Stack())
			}
		}
	}()
	body(h)
	return ""
}

// Record copies into r what the step did: its checks, its events (in time
// order within each section, the sections in the order the step declared
// them: parts run by Parallel overlap in time), its story, and the
// processes, commits and real-clock waits it made.
func (h *Harness) Record(r *result.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Checks = append([]result.Check(nil), h.checks...)
	r.Events = append([]result.Event(nil), h.events...)
	secIdx := map[string]int{}
	for _, e := range r.Events {
		if _, ok := secIdx[e.Section]; !ok {
			secIdx[e.Section] = len(secIdx)
		}
	}
	sort.SliceStable(r.Events, func(i, j int) bool {
		a, b := r.Events[i], r.Events[j]
		if secIdx[a.Section] != secIdx[b.Section] {
			return secIdx[a.Section] < secIdx[b.Section]
		}
		return a.At < b.At
	})
	r.Narrative = h.narr.String()
	r.Parts = append([]string(nil), h.parts...)
	r.Procs, r.Commits, r.Waits = h.nproc, int(h.commits.Load()), h.waited
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
		sub := &Harness{ctx: h.ctx, Root: h.Root, Dir: h.Dir, LogDir: h.LogDir, Judged: h.Judged, Bin: h.Bin, DB: h.DB, stop: h.stop,
			began: h.began, WaitLimit: h.WaitLimit, Limits: h.Limits, parent: h, part: cmp.Or(h.part, p.Name)}
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
	for _, p := range parts {
		if h.part == "" { // a part within a part is scored as its part
			h.parts = append(h.parts, p.Name)
		}
	}
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

// WaitClock waits until the real clock reaches t, or the step ends: a wait
// for real time to pass (a lease that really runs out), counted in the
// result's Waits.
func (h *Harness) WaitClock(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	h.mu.Lock()
	h.waited += d
	h.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-h.ctx.Done():
	}
}

// since is the real time elapsed in the step.
func (h *Harness) since() time.Duration { return time.Since(h.began) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// OnCleanup registers f to run when the step (or part) ends.
func (h *Harness) OnCleanup(f func()) {
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
