package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// checkPowerCutFlags refuses the flags that mean nothing with or without
// --power-cut, before any work.
func checkPowerCutFlags(fs *flag.FlagSet, powerCut bool, budget string, barrier, state int, programs []string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !powerCut {
		for _, name := range []string{"budget", "barrier", "state"} {
			if set[name] {
				return usageErr{fmt.Sprintf("crash: --%s is for --power-cut. Try: lab crash --power-cut --%s …", name, name)}
			}
		}
		return nil
	}
	for _, name := range []string{"kills", "at", "batch"} {
		if set[name] {
			return usageErr{fmt.Sprintf("crash: --%s is for crash points, not --power-cut. Try: lab crash --power-cut --program enqueue", name)}
		}
	}
	if _, ok := powercut.Budgets[budget]; !ok {
		return usageErr{fmt.Sprintf("crash: --budget %q: want small or full. Try: lab crash --power-cut --budget full", budget)}
	}
	if barrier < 0 || state < 0 {
		return usageErr{"crash: --barrier and --state must be >= 1. Try: lab crash --power-cut --program enqueue --barrier 6 --state 2"}
	}
	if state > 0 && barrier == 0 {
		return usageErr{"crash: --state S replays a state of one barrier: give --barrier B too"}
	}
	if barrier > 0 && (len(programs) != 1 || programs[0] == "none") {
		return usageErr{"crash: --barrier replays a power cut of one program. Try: lab crash --power-cut --program enqueue --barrier 6"}
	}
	if len(programs) == 1 && programs[0] == "none" {
		return usageErr{"crash: --program none is the soak alone, which --power-cut does not run"}
	}
	return nil
}

// crashOutputs are the report files of lab crash, either mode.
type crashOutputs struct {
	stdout                     io.Writer
	results, junit, html, json string
}

func (o crashOutputs) write(res result.Result, tookS float64, html, jsonOut func(io.Writer) error) error {
	took := time.Duration(tookS * float64(time.Second))
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		switch {
		case path == "-":
			return fn(o.stdout)
		case isDevice(path): // /dev/stderr in a grading container
			return writeDevice(path, fn)
		}
		return report.WriteFile(path, fn)
	}
	return errors.Join(
		write(o.results, func(w io.Writer) error { return report.WriteGradescope(w, []result.Result{res}, took) }),
		write(o.junit, func(w io.Writer) error { return report.WriteJUnit(w, []result.Result{res}, took) }),
		write(o.html, html),
		write(o.json, jsonOut),
	)
}

// runPowerCut runs lab crash --power-cut and writes its reports.
func runPowerCut(ctx context.Context, cfg crash.PowerCutConfig, outs crashOutputs, tty bool, stderr io.Writer) error {
	rep, err := crash.PowerCut(ctx, cfg)
	if errors.Is(err, crash.ErrNoTracing) {
		return skippedCrash(err, stderr)
	}
	if err != nil {
		return fmt.Errorf("crash --power-cut: %w", err)
	}
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err := rep.WriteTail(outs.stdout); err != nil {
		return err
	}
	if err := outs.write(rep.Result(), rep.TookS, rep.WriteHTML, rep.WriteJSON); err != nil {
		return err
	}
	if !rep.OK {
		built := 0
		for _, p := range rep.Programs {
			built += p.Built
		}
		return failed{len(rep.Violations), built}
	}
	return nil
}
