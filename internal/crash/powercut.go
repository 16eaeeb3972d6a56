package crash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"snacklab/internal/powercut"
	"snacklab/labsteps/harness"
)

// Power cuts (`lab crash --power-cut`): each program of the order story is
// run once to its end under the recorder; every state its files may be in
// after a power cut before one of its syncs or answers (under the model of
// internal/powercut, within the budget) is built on disk; the programs are
// restarted on it (their own recovery) and the invariants checked: at once,
// what its answers promised; and, once per distinct outcome of the
// recovery, the whole story's invariants after a drain (docs/crash.md).

// InvAnswered is the power cut's own invariant: what a program had
// answered before the cut (an acceptance, a grant, a finish, a redrive, a
// receiver's 200) is still true after the restart.
const InvAnswered = "answer-survives"

// PowerCutConfig says what `lab crash --power-cut` runs.
type PowerCutConfig struct {
	Bin  string
	Work string // parent of the work dir; "" is the system temp dir
	Keep bool   // keep the work dir
	// Programs limits the run (names of Programs); none means all.
	Programs []string
	Budget   powercut.Budget
	Seed     int64 // draws the budget's random states
	// Barrier and State (1-based; 0: all) replay one barrier, or one state
	// of it, of Programs[0]; the work dir is kept.
	Barrier, State int
	Progress       func(line string)
	// Judged is as Config's: every program, the recorded one included, runs
	// as it, and the states' files are handed to it.
	Judged *harness.Judged
}

// CutProgram is one program's power cuts.
type CutProgram struct {
	Program  string `json:"program"`
	Title    string `json:"title"`
	Ops      int    `json:"operations"` // recorded file operations and answers
	Barriers int    `json:"barriers"`   // places a cut was considered (before a sync or an answer, and at the end)
	// Exhaustive barriers had every combination of whole operations built.
	Exhaustive int `json:"barriers_exhaustive"`
	Built      int `json:"states_built"`
	// Checked are the distinct states (by the files they leave): each was
	// restarted on and checked. Outcomes are the distinct results of the
	// programs' recovery (by files and answers): each was drained and
	// checked in full.
	Checked    int     `json:"states_checked"`
	Outcomes   int     `json:"outcomes_drained"`
	Violations int     `json:"violations"`
	TookS      float64 `json:"took_s"`
	Error      string  `json:"error,omitempty"`
}

// CutViolation is an invariant a power-cut state broke, with the picture of
// that state.
type CutViolation struct {
	Violation
	Barrier int    `json:"barrier"` // 1-based
	State   int    `json:"state"`   // 1-based
	Label   string `json:"label"`
	Picture string `json:"picture"`
}

// PowerCutReport is the whole run.
type PowerCutReport struct {
	OK         bool            `json:"ok"`
	Bin        string          `json:"bin"`
	Seed       int64           `json:"seed"`
	Budget     powercut.Budget `json:"budget"`
	Programs   []CutProgram    `json:"programs"`
	Violations []CutViolation  `json:"violations"`
	// FloorS is one process start (as for crash points); PerStateS the
	// mean time to build, restart on and check one distinct state,
	// drains included.
	FloorS    float64 `json:"floor_s"`
	PerStateS float64 `json:"per_state_s"`
	Procs     int     `json:"processes"`
	TookS     float64 `json:"took_s"`
	Work      string  `json:"work,omitempty"`
}

// PowerCut records each selected program and checks every state of the
// budget. It returns ErrNoTracing where ptrace is not allowed.
func PowerCut(ctx context.Context, cfg PowerCutConfig) (*PowerCutReport, error) {
	t0 := time.Now()
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	sel := cfg.Programs
	if len(sel) == 0 {
		sel = Programs
	}
	if err := knownPrograms(sel); err != nil {
		return nil, err
	}
	if (cfg.Barrier > 0 || cfg.State > 0) && len(sel) != 1 {
		return nil, errors.New("a power-cut state is replayed for one program: name it")
	}
	if cfg.Budget.Name == "" {
		cfg.Budget = powercut.Small
	}
	if err := probe(cfg.Bin, cfg.Judged); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoTracing, err)
	}
	work, err := workDir(cfg.Work, "snacklab-powercut-*", cfg.Judged)
	if err != nil {
		return nil, err
	}
	rep := &PowerCutReport{Bin: cfg.Bin, Seed: cfg.Seed, Budget: cfg.Budget, Violations: []CutViolation{}}
	if cfg.Keep || cfg.Barrier > 0 {
		rep.Work = work
	} else {
		defer os.RemoveAll(work)
	}
	rep.FloorS = floor(ctx, cfg.Bin, cfg.Judged).Seconds()
	var stateTime time.Duration
	checked := 0
	for _, name := range sel {
		st := stories[name]
		st.name = name
		tp := time.Now()
		pr, vs, procs, d := powerCutProgram(ctx, cfg, st, filepath.Join(work, name))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		pr.TookS = time.Since(tp).Seconds()
		stateTime += d
		checked += pr.Checked
		rep.Procs += procs
		rep.Programs = append(rep.Programs, pr)
		rep.Violations = append(rep.Violations, vs...)
		cfg.Progress(pr.Line())
	}
	if checked > 0 {
		rep.PerStateS = stateTime.Seconds() / float64(checked)
	}
	rep.OK = len(rep.Violations) == 0
	for _, p := range rep.Programs {
		rep.OK = rep.OK && p.Error == ""
	}
	rep.TookS = time.Since(t0).Seconds()
	return rep, nil
}

// powerCutProgram records one program and checks its states. It returns
// the time spent on the states themselves (not the recording).
func powerCutProgram(ctx context.Context, cfg PowerCutConfig, st story, dir string) (CutProgram, []CutViolation, int, time.Duration) {
	pr := CutProgram{Program: st.name, Title: st.title}
	cs, procs, err := recordStory(ctx, cfg.Bin, cfg.Judged, st, filepath.Join(dir, "record"))
	if err != nil {
		pr.Error = "recording: " + err.Error()
		return pr, nil, procs, 0
	}
	m := cs.model
	pr.Ops, pr.Barriers = len(m.Rec.Ops), len(m.Barriers)
	var vs []CutViolation
	seenImage, outcomes := map[string]bool{}, map[string]bool{}
	var took time.Duration
	for bi, b := range m.Barriers {
		if cfg.Barrier > 0 && bi != cfg.Barrier-1 {
			continue
		}
		if m.Exhaustive(bi, cfg.Budget) {
			pr.Exhaustive++
		}
		for _, s := range m.States(bi, cfg.Budget, cfg.Seed) {
			if cfg.State > 0 && s.Index != cfg.State-1 {
				continue
			}
			if ctx.Err() != nil {
				return pr, vs, procs, took
			}
			pr.Built++
			image := cs.image(b, s)
			key := fmt.Sprintf("%d/%s", len(b.Answers), digest(image))
			if seenImage[key] {
				continue
			}
			seenImage[key] = true
			pr.Checked++
			t := time.Now()
			sdir := filepath.Join(dir, fmt.Sprintf("b%02d-s%03d", bi+1, s.Index+1))
			found, full, n, err := cs.check(ctx, cfg.Bin, b, image, sdir, outcomes)
			took += time.Since(t)
			if !cfg.Keep && cfg.Barrier == 0 {
				os.RemoveAll(sdir) // hundreds of states: keep only what was asked for
			}
			procs += n
			if full {
				pr.Outcomes++
			}
			if err != nil {
				pr.Error = fmt.Sprintf("barrier %d state %d: %v", bi+1, s.Index+1, err)
				return pr, vs, procs, took
			}
			replay := strings.TrimSpace(fmt.Sprintf("lab crash --power-cut --bin %s --program %s --barrier %d --state %d --budget %s --seed %d --keep %s",
				cfg.Bin, st.name, bi+1, s.Index+1, cfg.Budget.Name, cfg.Seed, strings.Join(judgedArgs(cfg.Judged), " ")))
			for _, v := range found {
				vs = append(vs, CutViolation{Violation: Violation{Program: st.name, Call: cs.cutText(b), N: bi + 1,
					Invariant: v.inv, Detail: v.detail, Replay: replay}, Barrier: bi + 1, State: s.Index + 1, Label: s.Label, Picture: m.Picture(s)})
				pr.Violations++
			}
			verdict := "ok"
			if len(found) > 0 {
				verdict = "VIOLATION " + found[0].inv
			}
			cfg.Progress(fmt.Sprintf("power-cut: %-8s barrier %d/%d state %d: %s", st.name, bi+1, len(m.Barriers), s.Index+1, verdict))
		}
	}
	return pr, vs, procs, took
}

// cutText says where a barrier's cut falls, for a violation's Call.
func (cs *cutStory) cutText(b powercut.Barrier) string {
	ops := cs.model.Rec.Ops
	if b.At == len(ops) {
		return "after the last operation"
	}
	op := ops[b.At]
	what := op.Call
	if op.Kind == powercut.Out {
		what += " " + op.Name
	} else if name := cs.model.Name(op.Inode); name != "" {
		what += " " + name
	} else if op.Kind == powercut.DirSync {
		what += " dir"
	}
	return fmt.Sprintf("before #%d %s", b.At, what)
}

// Line is the program's one line for people.
func (p CutProgram) Line() string {
	verdict := "ok"
	if p.Violations > 0 {
		verdict = fmt.Sprintf("%d VIOLATION(S)", p.Violations)
	}
	if p.Error != "" {
		verdict = "ERROR: " + p.Error
	}
	return fmt.Sprintf("power-cut: %-8s %3d operations, %2d barriers (%2d exhaustive), %4d states built, %3d checked, %2d outcomes drained: %s (%.1fs)",
		p.Program, p.Ops, p.Barriers, p.Exhaustive, p.Built, p.Checked, p.Outcomes, verdict, p.TookS)
}

// stoppable is a process the story can stop: a traced or recorded one.
type stoppable interface {
	Done() <-chan struct{}
	Signal(sig syscall.Signal) error
}
