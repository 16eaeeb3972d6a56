// Package crash verifies crash-restart behaviour black-box, over any
// implementation of CONTRACT.md: it kills each program of the order story
// at every crash point (each sync, write to a SQLite file, send on a socket
// and removal of the journal, counted across the process's threads),
// restarts what the story needs, drains the queue and checks the
// invariants (ALICE, OSDI 2014; CrashMonkey, OSDI 2018); then it soaks the
// whole system in seeded random SIGKILLs (Jepsen). `lab crash` runs it;
// docs/crash.md says what is checked and why.
package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/systrace"
)

// Config says what to run.
type Config struct {
	Bin  string // queuectl, sender, receiver
	Work string // parent of the work dir; "" is the system temp dir
	Keep bool   // keep the work dir
	// Programs limits the enumeration (names of Programs); none means all.
	Programs []string
	// Point replays one crash point: Programs[0] killed at its Point-th
	// crash point (the work dir is kept).
	Point int
	// Seed and Kills configure the soak; Kills 0 skips it.
	Seed  int64
	Kills int
	// Batch, above 1, runs the sender story and the soak's senders in
	// batched delivery (sender --batch Batch, CONTRACT.md §4.batch): opt-in,
	// since an implementation need not have it.
	Batch int
	// Progress receives one line per crash point and soak milestone.
	Progress func(line string)
	// Judged, when set, is the identity every program under test runs as
	// (lab crash --judged-uid; a grading container, docs/isolation.md):
	// the lab, the judge, traces and kills them and keeps their output
	// where they cannot write, as lab run does. Its Exec is the judged-exec
	// step the tracer starts each traced program through. nil: the
	// programs run as the lab.
	Judged *harness.Judged
}

// Point is one crash point and what came of it.
type Point struct {
	Program    string      `json:"program"`
	N          int         `json:"n"`
	Call       string      `json:"call"` // fsync, pwrite64, sendto, unlink, …
	File       string      `json:"file"` // q.db, q.db-journal, r.db, socket, dir
	OK         bool        `json:"ok"`
	Violations []Violation `json:"violations,omitempty"`
	TookS      float64     `json:"took_s"`
}

// ProgramReport is the enumeration of one program.
type ProgramReport struct {
	Program    string  `json:"program"`
	Title      string  `json:"title"`
	Points     int     `json:"crash_points"`
	Violations int     `json:"violations"`
	Durable    string  `json:"durable"` // "ok" or why not
	TookS      float64 `json:"took_s"`
	Error      string  `json:"error,omitempty"`
}

// Report is the whole run.
type Report struct {
	OK         bool            `json:"ok"`
	Bin        string          `json:"bin"`
	Seed       int64           `json:"seed"`
	Batch      int             `json:"batch,omitempty"` // the senders' --batch, when above 1
	Programs   []ProgramReport `json:"programs"`
	Points     []Point         `json:"points"`
	Violations []Violation     `json:"violations"`
	Soak       *SoakReport     `json:"soak,omitempty"`
	// FloorS is one process start on this machine, measured in this run
	// (median of 5 starts of `queuectl backoff`); PerPointS is the mean
	// time per crash point (a traced run, restarts, drain, checks).
	FloorS    float64 `json:"floor_s"`
	PerPointS float64 `json:"per_point_s"`
	Procs     int     `json:"processes"`
	TookS     float64 `json:"took_s"`
	Work      string  `json:"work,omitempty"`
	Skipped   string  `json:"skipped,omitempty"`
}

// ErrNoTracing is returned when this machine does not allow tracing.
var ErrNoTracing = errors.New("crash points need ptrace")

// Run enumerates every crash point of the selected programs, then soaks.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	t0 := time.Now()
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	sel := cfg.Programs
	switch {
	case len(sel) == 0:
		sel = Programs
	case len(sel) == 1 && sel[0] == "none": // the soak alone
		sel = nil
	}
	for _, p := range sel {
		if !slices.Contains(Programs, p) {
			return nil, fmt.Errorf("no program %q (want one of %s)", p, strings.Join(Programs, ", "))
		}
	}
	if cfg.Point > 0 && len(sel) != 1 {
		return nil, errors.New("a crash point is replayed for one program: name it")
	}
	if err := probe(cfg.Bin, cfg.Judged); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoTracing, err)
	}
	work, err := workDir(cfg.Work, "snacklab-crash-*", cfg.Judged)
	if err != nil {
		return nil, err
	}
	rep := &Report{Bin: cfg.Bin, Seed: cfg.Seed, Points: []Point{}, Violations: []Violation{}}
	if cfg.Batch > 1 {
		rep.Batch = cfg.Batch
	}
	if cfg.Keep || cfg.Point > 0 {
		rep.Work = work
	} else {
		defer os.RemoveAll(work)
	}
	rep.FloorS = floor(ctx, cfg.Bin, cfg.Judged).Seconds()

	var pointTime time.Duration
	for _, name := range sel {
		st := stories[name]
		st.name = name
		if name == "sender" && cfg.Batch > 1 {
			st = batchStory(cfg.Batch)
		}
		pr := ProgramReport{Program: name, Title: st.title, Durable: "not judged"}
		t1 := time.Now()
		first, last := 1, 0 // last 0: until a run is not hit
		if cfg.Point > 0 {
			first, last = cfg.Point, cfg.Point
		}
		for n := first; last == 0 || n <= last; n++ {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			tp := time.Now()
			pt, complete, procs, err := runPoint(ctx, cfg, st, n, filepath.Join(work, fmt.Sprintf("%s-%03d", name, n)))
			rep.Procs += procs
			if err != nil {
				pr.Error = fmt.Sprintf("crash point %d: %v", n, err)
				progress(fmt.Sprintf("crash: %-8s #%-3d ERROR %v", name, n, err))
				break
			}
			if complete != nil { // the run that was not hit: the program's end
				pr.Durable = complete.durable
				for _, v := range complete.violations {
					rep.Violations = append(rep.Violations, v)
					pr.Violations++
				}
				break
			}
			pt.TookS = time.Since(tp).Seconds()
			pointTime += time.Since(tp)
			rep.Points = append(rep.Points, pt)
			rep.Violations = append(rep.Violations, pt.Violations...)
			pr.Points++
			pr.Violations += len(pt.Violations)
			verdict := "ok"
			if !pt.OK {
				verdict = "VIOLATION " + pt.Violations[0].Invariant
			}
			progress(fmt.Sprintf("crash: %-8s #%-3d %-9s %-14s %s", name, n, pt.Call, pt.File, verdict))
		}
		pr.TookS = time.Since(t1).Seconds()
		rep.Programs = append(rep.Programs, pr)
		progress(pr.Line())
	}
	if len(rep.Points) > 0 {
		rep.PerPointS = pointTime.Seconds() / float64(len(rep.Points))
	}
	if cfg.Kills > 0 && cfg.Point == 0 {
		soak, err := Soak(ctx, cfg, filepath.Join(work, "soak"), progress)
		if err != nil {
			return nil, err
		}
		rep.Soak = soak
		progress(soak.Line())
		rep.Procs += soak.Procs
		for _, v := range soak.Violations {
			rep.Violations = append(rep.Violations, v)
		}
	}
	rep.OK = len(rep.Violations) == 0
	for _, p := range rep.Programs {
		rep.OK = rep.OK && p.Error == ""
	}
	rep.TookS = time.Since(t0).Seconds()
	return rep, nil
}

// workDir makes the run's work dir under parent. With a judged identity it
// is 0711: the judged reach their dirs in it but cannot list it.
func workDir(parent, pattern string, j *harness.Judged) (string, error) {
	work, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		return "", err
	}
	if j != nil {
		if err := os.Chmod(work, 0o711); err != nil {
			os.RemoveAll(work)
			return "", err
		}
	}
	return work, nil
}

// Line is the program's one line for people.
func (p ProgramReport) Line() string {
	verdict := "ok"
	if p.Violations > 0 {
		verdict = fmt.Sprintf("%d VIOLATION(S)", p.Violations)
	}
	if p.Error != "" {
		verdict = "ERROR: " + p.Error
	}
	return fmt.Sprintf("crash: %-8s %3d crash points, %s; durable answers: %s (%.1fs)", p.Program, p.Points, verdict, p.Durable, p.TookS)
}

type completeRun struct {
	durable    string
	violations []Violation
}

// runPoint builds a fresh world for st, kills its program at crash point n
// and checks the invariants after the drain. When the program was not hit
// (it has fewer than n crash points), it returns the judgement of that
// complete run instead.
func runPoint(ctx context.Context, cfg Config, st story, n int, dir string) (Point, *completeRun, int, error) {
	w, err := newWorld(ctx, cfg.Bin, dir, cfg.Judged)
	if err != nil {
		return Point{}, nil, 0, err
	}
	defer func() {
		if w.recv != nil && w.recv.alive() {
			w.recv.kill()
		}
	}()
	if r := w.queuectl("init", t0); r.Code != 0 {
		return Point{}, nil, w.procs, fmt.Errorf("queuectl init: %s: %s", r, firstLine(r.Stderr))
	}
	if err := st.setup(w); err != nil {
		return Point{}, nil, w.procs, err
	}
	res, k, err := w.traced(st, n)
	if err != nil {
		return Point{}, nil, w.procs, err
	}
	replay := strings.Join(append(append([]string{"lab crash --bin", cfg.Bin, "--program", st.name, "--at", ms(int64(n))}, batchArgs(cfg)...), judgedArgs(cfg.Judged)...), " ")
	pt := Point{Program: st.name, N: n, OK: true}
	var vs []vio
	if k.Hit == nil {
		// Not hit: judge the answers of this complete run from its trace.
		c := &completeRun{durable: "ok"}
		if res.Code != 0 {
			c.violations = append(c.violations, Violation{Program: st.name, N: 0, Invariant: InvRestart,
				Detail: fmt.Sprintf("the story's %s, not killed, ended %s: %s", st.title, res, firstLine(res.Stderr)), Replay: replay})
			c.durable = "not judged (the run failed)"
		} else if msg, call := judgeDurable(w, st, &k, res.StdoutFile); msg != "" {
			c.durable = msg
			c.violations = append(c.violations, Violation{Program: st.name, Call: call, Invariant: InvDurable, Detail: msg, Replay: replay})
		}
		return Point{}, c, w.procs, nil
	}
	pt.Call, pt.File = k.Hit.Name, w.role(k.Hit.Path)
	if err := w.atomic(st); errors.Is(err, errUnreadable) {
		vs = append(vs, vio{InvRestart, err.Error()})
	} else if err != nil {
		vs = append(vs, vio{InvAtomic, err.Error()})
	}
	if st.after != nil {
		if err := st.after(w, res); err != nil {
			vs = append(vs, vio{InvRestart, err.Error()})
		}
	}
	now, err := w.drain(t0+10_000, false)
	if err != nil {
		vs = append(vs, vio{InvDrain, err.Error()})
	}
	vs = append(vs, w.check(now)...)
	for _, v := range vs {
		pt.OK = false
		pt.Violations = append(pt.Violations, Violation{Program: st.name, Call: pt.Call + " " + pt.File, N: n,
			Invariant: v.inv, Detail: v.detail, Replay: replay})
	}
	return pt, nil, w.procs, nil
}

// judgeDurable applies systrace.Durable to the answer of a complete run
// that reports a commit (CONTRACT §2: enqueue "returns after the commit"):
// the acceptance, the redrive, the finish (the sender's `finished` event,
// its last line), the receiver's response. Earlier lines (the sender's
// `claimed`) are not judged: the contract does not say when they come.
//
// The answers on stdout are the writes to stdoutFile, the file the program
// was given, by any process of its tree: a shim's or a wrapper's command
// substitution writes to a descriptor 1 of its own.
func judgeDurable(w *world, st story, k *systrace.Killed, stdoutFile string) (msg, call string) {
	t := k.Trace()
	report := st.report
	if st.name != "receiver" && stdoutFile != "" {
		report = systrace.ToFile(stdoutFile)
	}
	var reports []int
	for i, c := range t.Calls {
		if report(c) {
			reports = append(reports, i)
		}
	}
	if len(reports) == 0 {
		return "no answer found in the trace", ""
	}
	db := st.reportDB(w)
	final := reports[len(reports)-1]
	if st.name == "receiver" {
		final = reports[0] // its one response, to an order it applied
	}
	if _, err := systrace.Durable(t, db, final, true); err != nil {
		c := t.Calls[final]
		return strings.ReplaceAll(err.Error(), w.dir+"/", ""), c.Name + " " + w.role(c.Path)
	}
	return "", ""
}

// drain restarts the receiver if needed and runs a sender (mode run: until
// nothing is claimable) until no job is pending or leased, advancing the
// clock past leases and backoffs; redriveDead also redrives dead jobs, as
// the soak's operator does. It returns the last instant used.
func (w *world) drain(now int64, redriveDead bool) (int64, error) {
	for i := 0; i < 30; i++ {
		if w.recv == nil || !w.recv.alive() {
			if _, err := w.startReceiver(); err != nil {
				return now, fmt.Errorf("restarting the receiver on the file the crash left: %v", err)
			}
		}
		r := w.run("sender", "run", "--db", w.q, "--url", w.recv.URL, "--owner", fmt.Sprintf("B%d", i), "--json", "--now-ms", ms(now))
		if r.Code != 0 {
			return now, fmt.Errorf("sender B after the crash: %s: %s", r, firstLine(r.Stderr))
		}
		s := w.queuectl("stats", now)
		var st struct {
			Counts map[string]int64 `json:"counts"`
		}
		if err := json.Unmarshal([]byte(firstLine(s.Stdout)), &st); s.Code != 0 || err != nil || st.Counts == nil {
			return now, fmt.Errorf("queuectl stats: %s printed %q, want CONTRACT §3's counts", s, firstLine(s.Stdout))
		}
		now += 120_000 // past a lease (30 s) and the longest backoff (60 s)
		if st.Counts["pending"] > 0 || st.Counts["leased"] > 0 {
			continue
		}
		if !redriveDead || st.Counts["dead"] == 0 {
			return now, nil
		}
		for _, id := range sortedKeys(w.accepted) {
			if show := w.queuectl("show", now, "--id", id); strings.Contains(show.Stdout, `"state":"dead"`) {
				w.queuectl("redrive", now, "--id", id, "--note", "drain-"+id)
			}
		}
	}
	return now, errors.New("after 30 rounds of senders some job is still pending or leased")
}

// probe runs `queuectl backoff` (no file) under the tracer: ptrace may be
// forbidden here (a container without CAP_SYS_PTRACE). strace itself is
// not needed.
// With a judged identity the probe also starts it through the judged-exec
// step, so a lab that cannot change identity fails here, not at a point.
func probe(bin string, j *harness.Judged) error {
	argv, err := j.TracedArgv(filepath.Join(bin, "queuectl"))
	if err != nil {
		return err
	}
	p, err := systrace.KillAt(append(argv, "backoff", "--id", "o-1", "--attempt", "1"), systrace.KillOptions{Dir: os.TempDir(), Env: j.Env()})
	if err != nil {
		return err
	}
	k, err := p.Wait()
	if err == nil && k.Code != 0 {
		err = fmt.Errorf("queuectl backoff under ptrace ended %d %s", k.Code, k.Signal)
	}
	return err
}

// floor is one process start here and now: the median of 5 starts of
// `queuectl backoff`, which opens no file.
func floor(ctx context.Context, bin string, j *harness.Judged) time.Duration {
	w := &world{ctx: ctx, bin: bin, judged: j, accepted: map[string]int64{}, redriveOK: map[string]int{}, redriveKilled: map[string]int{},
		logs: os.TempDir(), cwd: os.TempDir()}
	var ds []time.Duration
	for range 5 {
		t := time.Now()
		w.run("queuectl", "backoff", "--id", "o-1", "--attempt", "1")
		ds = append(ds, time.Since(t))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[2]
}
