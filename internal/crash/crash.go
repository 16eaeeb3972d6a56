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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"snacklab/labsteps/harness"
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
	sel, err := selectPrograms(cfg)
	if err != nil {
		return nil, err
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
		pr, took, err := enumerate(ctx, cfg, rep, name, work, progress)
		if err != nil {
			return nil, err
		}
		pointTime += took
		rep.Programs = append(rep.Programs, pr)
		progress(pr.Line())
	}
	if len(rep.Points) > 0 {
		rep.PerPointS = pointTime.Seconds() / float64(len(rep.Points))
	}
	if cfg.Kills > 0 && cfg.Point == 0 {
		if err := soakInto(ctx, cfg, rep, filepath.Join(work, "soak"), progress); err != nil {
			return nil, err
		}
	}
	rep.OK = len(rep.Violations) == 0
	for _, p := range rep.Programs {
		rep.OK = rep.OK && p.Error == ""
	}
	rep.TookS = time.Since(t0).Seconds()
	return rep, nil
}

// selectPrograms is the programs cfg enumerates: all of Programs when none
// is named, none for "none" (the soak alone). A replayed point needs one.
func selectPrograms(cfg Config) ([]string, error) {
	sel := cfg.Programs
	switch {
	case len(sel) == 0:
		sel = Programs
	case len(sel) == 1 && sel[0] == "none": // the soak alone
		sel = nil
	}
	if err := knownPrograms(sel); err != nil {
		return nil, err
	}
	if cfg.Point > 0 && len(sel) != 1 {
		return nil, errors.New("a crash point is replayed for one program: name it")
	}
	return sel, nil
}

// knownPrograms refuses a name that is not one of Programs.
func knownPrograms(sel []string) error {
	for _, p := range sel {
		if !slices.Contains(Programs, p) {
			return fmt.Errorf("no program %q (want one of %s)", p, strings.Join(Programs, ", "))
		}
	}
	return nil
}

// enumerate kills program name at each of its crash points in turn, until
// a run is not hit (its complete run is then judged), or at cfg.Point alone
// when one is replayed. It adds the points, violations and processes to rep
// and returns the program's report and the time its points took. An error
// at a point ends the program (its report says it), not the run; only a
// cancelled ctx does that.
func enumerate(ctx context.Context, cfg Config, rep *Report, name, work string, progress func(string)) (ProgramReport, time.Duration, error) {
	st := stories[name]
	st.name = name
	if name == "sender" && cfg.Batch > 1 {
		st = batchStory(cfg.Batch)
	}
	pr := ProgramReport{Program: name, Title: st.title, Durable: "not judged"}
	t1 := time.Now()
	var pointTime time.Duration
	first, last := 1, 0 // last 0: until a run is not hit
	if cfg.Point > 0 {
		first, last = cfg.Point, cfg.Point
	}
	for n := first; last == 0 || n <= last; n++ {
		if ctx.Err() != nil {
			return pr, pointTime, ctx.Err()
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
			rep.Violations = append(rep.Violations, complete.violations...)
			pr.Violations += len(complete.violations)
			break
		}
		pt.TookS = time.Since(tp).Seconds()
		pointTime += time.Since(tp)
		rep.Points = append(rep.Points, pt)
		rep.Violations = append(rep.Violations, pt.Violations...)
		pr.Points++
		pr.Violations += len(pt.Violations)
		progress(fmt.Sprintf("crash: %-8s #%-3d %-9s %-14s %s", name, n, pt.Call, pt.File, pt.verdict()))
	}
	pr.TookS = time.Since(t1).Seconds()
	return pr, pointTime, nil
}

// verdict is the point's word in a progress line: ok, or the first
// invariant it broke.
func (pt Point) verdict() string {
	if !pt.OK {
		return "VIOLATION " + pt.Violations[0].Invariant
	}
	return "ok"
}

// soakInto runs the soak in dir and adds what it found to rep.
func soakInto(ctx context.Context, cfg Config, rep *Report, dir string, progress func(string)) error {
	soak, err := Soak(ctx, cfg, dir, progress)
	if err != nil {
		return err
	}
	rep.Soak = soak
	progress(soak.Line())
	rep.Procs += soak.Procs
	rep.Violations = append(rep.Violations, soak.Violations...)
	return nil
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
