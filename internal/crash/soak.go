package crash

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SoakReport is the random soak's outcome.
type SoakReport struct {
	Seed     int64          `json:"seed"`
	Batch    int            `json:"batch,omitempty"` // the senders' --batch, when above 1
	Kills    int            `json:"kills"`
	ByKind   map[string]int `json:"kills_by_kind"` // sender, receiver, enqueue, redrive
	Accepted int            `json:"accepted"`
	Done     int            `json:"done"`
	// Lost, Doubled and Integrity count the violations of the accepted,
	// stock and integrity invariants.
	Lost       int         `json:"lost"`
	Doubled    int         `json:"doubled"`
	Integrity  int         `json:"integrity_failures"`
	KillsPerS  float64     `json:"kills_per_s"`
	Procs      int         `json:"processes"`
	TookS      float64     `json:"took_s"`
	Violations []Violation `json:"violations"`
}

// Line is the soak's one line for people.
func (s *SoakReport) Line() string {
	verdict := "ok"
	if len(s.Violations) > 0 {
		verdict = fmt.Sprintf("%d VIOLATION(S)", len(s.Violations))
	}
	batch := ""
	if s.Batch > 1 {
		batch = fmt.Sprintf("senders --batch %d; ", s.Batch)
	}
	return fmt.Sprintf("crash: soak     %d kills (%sseed %d; %.1f kills/s; sender %d, receiver %d, enqueue %d, redrive %d), %d accepted, %d done, %d lost, %d doubled, %d integrity failures: %s (%.1fs)",
		s.Kills, batch, s.Seed, s.KillsPerS, s.ByKind["sender"], s.ByKind["receiver"], s.ByKind["enqueue"], s.ByKind["redrive"],
		s.Accepted, s.Done, s.Lost, s.Doubled, s.Integrity, verdict, s.TookS)
}

// soakProc is a process the killer may pick.
type soakProc struct {
	kind string
	pid  int
}

// Soak runs three senders, an enqueuer, an operator redriving and the
// receiver as real processes, and SIGKILLs one of them at seeded random
// moments until cfg.Kills kills are done; the receiver is restarted on its
// file at its new address. Then it drains the queue (redriving what the
// kills quarantined) and checks the invariants over every job.
//
// The seed fixes the plan: who is killed, after which pause, the orders'
// quantities, which job the operator redrives. The operating system's
// interleaving is not replayed; a violation names the seed and the kill
// count so the same plan can be run again (and again) to find it.
func Soak(ctx context.Context, cfg Config, dir string, progress func(string)) (*SoakReport, error) {
	t1 := time.Now()
	s := &soak{ctx: ctx, cfg: cfg, progress: progress, running: map[int]soakProc{}, stop: make(chan struct{}),
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)), rep: &SoakReport{Seed: cfg.Seed, ByKind: map[string]int{}}}
	if cfg.Batch > 1 {
		s.rep.Batch = cfg.Batch
	}
	w, err := newWorld(ctx, cfg.Bin, dir, cfg.Judged)
	if err != nil {
		return nil, err
	}
	s.w = w
	if r := w.queuectl("init", t0); r.Code != 0 {
		return nil, fmt.Errorf("soak: queuectl init: %s", r)
	}
	if _, err := w.startReceiver(); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	s.clock.Store(t0)
	p := s.plan()
	var wg sync.WaitGroup
	for n := range 3 {
		wg.Go(func() { s.sender(n) })
	}
	wg.Go(func() { s.enqueuer(p) })
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		s.superviseReceiver()
	}()
	s.kill()
	close(s.stop)
	wg.Wait()
	<-recvDone
	s.judge(p)
	s.rep.TookS = time.Since(t1).Seconds()
	return s.rep, nil
}

// soak is one run of Soak: its world, its injected clock, and the
// processes running that the killer may pick.
type soak struct {
	ctx      context.Context
	cfg      Config
	w        *world
	rng      *rand.Rand // the killer's and the plan's; the killer's goroutine alone draws after the plan
	rep      *SoakReport
	progress func(string)
	clock    atomic.Int64
	mu       sync.Mutex
	running  map[int]soakProc
	stop     chan struct{}
}

// soakPlan is the plan's random choices, drawn up front so the seed fixes
// them: the orders' quantities and which job the operator redrives.
type soakPlan struct {
	qtys       []int64
	redriveIDs []int
}

func (s *soak) plan() soakPlan {
	jobs := max(20, s.cfg.Kills/4)
	p := soakPlan{qtys: make([]int64, jobs), redriveIDs: make([]int, 4*jobs)}
	for i := range p.qtys {
		p.qtys[i] = 1 + s.rng.Int64N(9)
	}
	for i := range p.redriveIDs {
		p.redriveIDs[i] = s.rng.IntN(jobs)
	}
	return p
}

// tick advances the injected clock by 250 ms and returns it.
func (s *soak) tick() int64 { return s.clock.Add(250) }

// stopped reports whether the kills are over (or the run was cancelled).
func (s *soak) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return s.ctx.Err() != nil
	}
}

// url is the receiver's address now (it changes at each restart).
func (s *soak) url() string {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.recv.URL
}

// launch runs one process to its end, where the killer can see it.
func (s *soak) launch(kind, prog string, args ...string) result {
	cmd := s.w.command(s.ctx, prog, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return result{Argv: append([]string{prog}, args...), Code: -1, Signal: "never started"}
	}
	s.mu.Lock()
	s.running[cmd.Process.Pid] = soakProc{kind, cmd.Process.Pid}
	s.mu.Unlock()
	err := cmd.Wait()
	s.mu.Lock()
	delete(s.running, cmd.Process.Pid)
	s.mu.Unlock()
	return s.w.ended(prog, args, &stdout, &stderr, cmd.ProcessState, err)
}

// sender is one of the three senders: run-once after run-once, each under
// an owner of its own, until the kills are over.
func (s *soak) sender(n int) {
	for k := 0; !s.stopped(); k++ {
		s.launch("sender", "sender", append([]string{"run-once", "--db", s.w.q, "--url", s.url(), "--owner", fmt.Sprintf("S%d-%d", n, k),
			"--json", "--now-ms", ms(s.tick()), "--lease-ms", "2000"}, batchArgs(s.cfg)...)...)
	}
}

// enqueuer enqueues each order until accepted (a killed enqueue is
// retried, as a client that got no answer does), then, as the operator,
// redrives jobs picked by the plan (refused unless dead).
func (s *soak) enqueuer(p soakPlan) {
	jobs, k := len(p.qtys), 0
	redrive := func(upto int) {
		id := fmt.Sprintf("o-%d", p.redriveIDs[k%len(p.redriveIDs)]%upto+1)
		s.launch("redrive", "queuectl", "redrive", "--db", s.w.q, "--json", "--now-ms", ms(s.tick()), "--id", id, "--note", fmt.Sprintf("soak-%d", k))
		k++
	}
	for i := 0; i < jobs && !s.stopped(); i++ {
		id := fmt.Sprintf("o-%d", i+1)
		for !s.stopped() {
			r := s.launch("enqueue", "queuectl", "enqueue", "--db", s.w.q, "--json", "--now-ms", ms(s.tick()), "--id", id,
				"--qty", ms(p.qtys[i]), "--max-attempts", "3")
			if r.Code == 0 {
				break
			}
		}
		if i%2 == 1 {
			redrive(i + 1)
		}
	}
	for !s.stopped() {
		redrive(jobs)
	}
}

// superviseReceiver restarts the receiver after each kill, on its file at
// its new address.
func (s *soak) superviseReceiver() {
	for {
		s.w.mu.Lock()
		rc := s.w.recv
		s.w.mu.Unlock()
		select {
		case <-rc.done:
		case <-s.stop:
			return
		}
		if s.stopped() {
			return
		}
		if _, err := s.w.startReceiver(); err != nil {
			s.progress("crash: soak: restarting the receiver: " + err.Error())
			return
		}
	}
}

// kill SIGKILLs a process of a kind the plan picks, after a pause it
// picks, until cfg.Kills kills are done.
func (s *soak) kill() {
	kinds := []string{"sender", "sender", "sender", "sender", "sender", "receiver", "enqueue", "redrive"}
	tk := time.Now()
	for s.rep.Kills < s.cfg.Kills && s.ctx.Err() == nil {
		pause := time.Duration(s.rng.IntN(15)) * time.Millisecond
		want := kinds[s.rng.IntN(len(kinds))]
		pick := s.rng.IntN(1 << 20)
		time.Sleep(pause) // a random moment: the pause is the plan, not a synchronisation
		for s.ctx.Err() == nil {
			if victims := s.victims(want); len(victims) > 0 {
				v := victims[pick%len(victims)]
				if syscall.Kill(-v.pid, syscall.SIGKILL) == nil {
					s.rep.Kills++
					s.rep.ByKind[v.kind]++
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
		if s.rep.Kills%100 == 0 && s.rep.Kills > 0 {
			s.progress(fmt.Sprintf("crash: soak: %d/%d kills", s.rep.Kills, s.cfg.Kills))
		}
	}
	if d := time.Since(tk).Seconds(); d > 0 {
		s.rep.KillsPerS = float64(s.rep.Kills) / d
	}
}

// victims are the running processes of kind want (any running process
// when none is), in pid order; the receiver when it is wanted and alive.
func (s *soak) victims(want string) []soakProc {
	var victims []soakProc
	s.mu.Lock()
	for _, p := range s.running {
		if p.kind == want {
			victims = append(victims, p)
		}
	}
	if len(victims) == 0 {
		for _, p := range s.running {
			victims = append(victims, p)
		}
	}
	s.mu.Unlock()
	s.w.mu.Lock()
	rc := s.w.recv
	s.w.mu.Unlock()
	if want == "receiver" && rc.alive() {
		victims = []soakProc{{"receiver", rc.cmd.Process.Pid}}
	}
	sort.Slice(victims, func(i, j int) bool { return victims[i].pid < victims[j].pid })
	return victims
}

// judge enqueues the orders the kills stopped before they were accepted
// (the client still wants them), drains the queue and checks the
// invariants over every job, into the report.
func (s *soak) judge(p soakPlan) {
	w, rep := s.w, s.rep
	for i := range p.qtys {
		id := fmt.Sprintf("o-%d", i+1)
		if _, ok := w.accepted[id]; !ok {
			w.queuectl("enqueue", s.clock.Load(), "--id", id, "--qty", ms(p.qtys[i]), "--max-attempts", "3")
		}
	}
	now, err := w.drain(s.clock.Load()+10_000, true)
	var vs []vio
	if err != nil {
		vs = append(vs, vio{InvDrain, err.Error()})
	}
	vs = append(vs, w.check(now)...)
	replay := strings.Join(append(append([]string{fmt.Sprintf("lab crash --bin %s --program none --seed %d --kills %d", s.cfg.Bin, s.cfg.Seed, s.cfg.Kills)},
		batchArgs(s.cfg)...), judgedArgs(s.cfg.Judged)...), " ")
	for _, v := range vs {
		switch v.inv {
		case InvAccepted:
			rep.Lost++
		case InvStock:
			rep.Doubled++
		case InvIntegrity:
			rep.Integrity++
		}
		rep.Violations = append(rep.Violations, Violation{Program: "soak", Invariant: v.inv, Detail: v.detail, Replay: replay})
	}
	rep.Accepted = len(w.accepted)
	for id := range w.accepted {
		if r := w.queuectl("show", now, "--id", id); bytes.Contains([]byte(r.Stdout), []byte(`"state":"done"`)) {
			rep.Done++
		}
	}
	rep.Procs = w.procs
}
