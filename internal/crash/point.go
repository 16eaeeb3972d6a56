package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"snacklab/labsteps/systrace"
)

// One crash point: a fresh world, its program killed at the point, the
// story's restarts and drain, then the invariants (check.go).

// completeRun is the judgement of a run that was not hit: its program has
// fewer crash points than the one asked for.
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
		return Point{}, judgeComplete(w, st, res, &k, replay), w.procs, nil
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

// judgeComplete judges the answers of a run that was not hit (the
// program's complete run) from its trace.
func judgeComplete(w *world, st story, res result, k *systrace.Killed, replay string) *completeRun {
	c := &completeRun{durable: "ok"}
	if res.Code != 0 {
		c.violations = append(c.violations, Violation{Program: st.name, N: 0, Invariant: InvRestart,
			Detail: fmt.Sprintf("the story's %s, not killed, ended %s: %s", st.title, res, firstLine(res.Stderr)), Replay: replay})
		c.durable = "not judged (the run failed)"
	} else if msg, call := judgeDurable(w, st, k, res.StdoutFile); msg != "" {
		c.durable = msg
		c.violations = append(c.violations, Violation{Program: st.name, Call: call, Invariant: InvDurable, Detail: msg, Replay: replay})
	}
	return c
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
