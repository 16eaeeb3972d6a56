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
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed))
	rep := &SoakReport{Seed: cfg.Seed, ByKind: map[string]int{}}
	if cfg.Batch > 1 {
		rep.Batch = cfg.Batch
	}
	w, err := newWorld(ctx, cfg.Bin, dir, cfg.Judged)
	if err != nil {
		return nil, err
	}
	if r := w.queuectl("init", t0); r.Code != 0 {
		return nil, fmt.Errorf("soak: queuectl init: %s", r)
	}
	if _, err := w.startReceiver(); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	var (
		clock   atomic.Int64
		mu      sync.Mutex
		running = map[int]soakProc{}
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	clock.Store(t0)
	tick := func() int64 { return clock.Add(250) }
	// launch runs one process to its end, where the killer can see it.
	launch := func(kind, prog string, args ...string) result {
		cmd := w.command(ctx, prog, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return result{Argv: append([]string{prog}, args...), Code: -1, Signal: "never started"}
		}
		mu.Lock()
		running[cmd.Process.Pid] = soakProc{kind, cmd.Process.Pid}
		mu.Unlock()
		err := cmd.Wait()
		mu.Lock()
		delete(running, cmd.Process.Pid)
		mu.Unlock()
		return w.ended(prog, args, &stdout, &stderr, cmd.ProcessState, err)
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	url := func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.recv.URL
	}

	// The plan's random choices are drawn up front, so the seed fixes them.
	jobs := max(20, cfg.Kills/4)
	qtys := make([]int64, jobs)
	for i := range qtys {
		qtys[i] = 1 + rng.Int64N(9)
	}
	redriveIDs := make([]int, 4*jobs)
	for i := range redriveIDs {
		redriveIDs[i] = rng.IntN(jobs)
	}

	// Three senders.
	for s := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stopped(); k++ {
				launch("sender", "sender", append([]string{"run-once", "--db", w.q, "--url", url(), "--owner", fmt.Sprintf("S%d-%d", s, k),
					"--json", "--now-ms", ms(tick()), "--lease-ms", "2000"}, batchArgs(cfg)...)...)
			}
		}()
	}
	// The enqueuer: each order until accepted (a killed enqueue is retried,
	// as a client that got no answer does), then the operator redrives
	// jobs picked by the plan (refused unless dead).
	wg.Add(1)
	go func() {
		defer wg.Done()
		k := 0
		redrive := func(upto int) {
			id := fmt.Sprintf("o-%d", redriveIDs[k%len(redriveIDs)]%upto+1)
			launch("redrive", "queuectl", "redrive", "--db", w.q, "--json", "--now-ms", ms(tick()), "--id", id, "--note", fmt.Sprintf("soak-%d", k))
			k++
		}
		for i := 0; i < jobs && !stopped(); i++ {
			id := fmt.Sprintf("o-%d", i+1)
			for !stopped() {
				r := launch("enqueue", "queuectl", "enqueue", "--db", w.q, "--json", "--now-ms", ms(tick()), "--id", id,
					"--qty", ms(qtys[i]), "--max-attempts", "3")
				if r.Code == 0 {
					break
				}
			}
			if i%2 == 1 {
				redrive(i + 1)
			}
		}
		for !stopped() {
			redrive(jobs)
		}
	}()
	// The receiver's supervisor restarts it after each kill.
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			w.mu.Lock()
			rc := w.recv
			w.mu.Unlock()
			select {
			case <-rc.done:
			case <-stop:
				return
			}
			if stopped() {
				return
			}
			if _, err := w.startReceiver(); err != nil {
				progress("crash: soak: restarting the receiver: " + err.Error())
				return
			}
		}
	}()

	// The killer.
	kinds := []string{"sender", "sender", "sender", "sender", "sender", "receiver", "enqueue", "redrive"}
	tk := time.Now()
	for rep.Kills < cfg.Kills && ctx.Err() == nil {
		pause := time.Duration(rng.IntN(15)) * time.Millisecond
		want := kinds[rng.IntN(len(kinds))]
		pick := rng.IntN(1 << 20)
		time.Sleep(pause) // a random moment: the pause is the plan, not a synchronisation
		for ctx.Err() == nil {
			var victims []soakProc
			mu.Lock()
			for _, p := range running {
				if p.kind == want {
					victims = append(victims, p)
				}
			}
			if len(victims) == 0 {
				for _, p := range running {
					victims = append(victims, p)
				}
			}
			mu.Unlock()
			w.mu.Lock()
			rc := w.recv
			w.mu.Unlock()
			if want == "receiver" && rc.alive() {
				victims = []soakProc{{"receiver", rc.cmd.Process.Pid}}
			}
			if len(victims) > 0 {
				sort.Slice(victims, func(i, j int) bool { return victims[i].pid < victims[j].pid })
				v := victims[pick%len(victims)]
				if syscall.Kill(-v.pid, syscall.SIGKILL) == nil {
					rep.Kills++
					rep.ByKind[v.kind]++
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
		if rep.Kills%100 == 0 && rep.Kills > 0 {
			progress(fmt.Sprintf("crash: soak: %d/%d kills", rep.Kills, cfg.Kills))
		}
	}
	if d := time.Since(tk).Seconds(); d > 0 {
		rep.KillsPerS = float64(rep.Kills) / d
	}
	close(stop)
	wg.Wait()
	<-recvDone
	// Orders the kills stopped before they were accepted are enqueued now:
	// the client still wants them.
	for i := range jobs {
		id := fmt.Sprintf("o-%d", i+1)
		if _, ok := w.accepted[id]; !ok {
			w.queuectl("enqueue", clock.Load(), "--id", id, "--qty", ms(qtys[i]), "--max-attempts", "3")
		}
	}
	now, err := w.drain(clock.Load()+10_000, true)
	var vs []vio
	if err != nil {
		vs = append(vs, vio{InvDrain, err.Error()})
	}
	vs = append(vs, w.check(now)...)
	replay := strings.Join(append([]string{fmt.Sprintf("lab crash --bin %s --program none --seed %d --kills %d", cfg.Bin, cfg.Seed, cfg.Kills)}, batchArgs(cfg)...), " ")
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
		if s := w.queuectl("show", now, "--id", id); bytes.Contains([]byte(s.Stdout), []byte(`"state":"done"`)) {
			rep.Done++
		}
	}
	rep.Procs = w.procs
	rep.TookS = time.Since(t1).Seconds()
	return rep, nil
}
