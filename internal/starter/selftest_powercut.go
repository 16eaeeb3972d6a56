package starter

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/labsteps/mutants"
)

// powerCutSeed fixes the random states of the self-test's power cuts, so
// a run is replayed by `lab crash --power-cut --seed 1`.
const powerCutSeed = 1

// powerCutPrograms is what `lab crash --power-cut` must check for a
// target: a mutant's "# powercut:" programs; for the reference, every
// program some selected mutant names; nothing for the starter.
func powerCutPrograms(out *Outcome, all []mutants.Mutant) []string {
	if out.Kind == KindStarter || out.Kind == KindVariant {
		return nil
	}
	var progs []string
	for _, m := range all {
		if out.Kind == KindMutant && m.Name != out.Name {
			continue
		}
		for _, p := range m.PowerCut {
			if !slices.Contains(progs, p) {
				progs = append(progs, p)
			}
		}
	}
	return progs
}

// gradePowerCut checks the power-cut states of progs (small budget) against
// a built target and adds its row: the reference must show no violation,
// a mutant at least one.
func gradePowerCut(ctx context.Context, out *Outcome, bin, dir string, progs []string) {
	row := Row{Crash: "power cut: " + strings.Join(progs, ","), Want: "reject"}
	if out.Kind == KindReference {
		row.Want = "pass"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		out.Error = err.Error()
		return
	}
	rep, err := crash.PowerCut(ctx, crash.PowerCutConfig{Bin: bin, Work: dir, Programs: progs, Budget: powercut.Small, Seed: powerCutSeed})
	states := func() string {
		n := 0
		for _, p := range rep.Programs {
			n += p.Checked
		}
		return fmt.Sprintf("%d power-cut states", n)
	}
	switch {
	case err != nil:
		row.Result, row.Detail = "error", err.Error()
	case out.Kind == KindReference:
		row.OK = rep.OK
		row.Result = fmt.Sprintf("%d violation(s) in %s", len(rep.Violations), states())
	default:
		row.OK = len(rep.Violations) > 0
		row.Result = fmt.Sprintf("rejected: %d violation(s) in %s", len(rep.Violations), states())
		if !row.OK {
			row.Result = "0 violations in " + states()
		}
	}
	if err == nil && len(rep.Violations) > 0 {
		v := rep.Violations[0]
		row.Check = v.Invariant
		if !row.OK || out.Kind != KindReference {
			row.Detail = fmt.Sprintf("%s, power cut %s (barrier %d, state %d): %s: %s\n%s\nreplay: %s",
				v.Program, v.Call, v.Barrier, v.State, v.Invariant, v.Detail, v.Picture, v.Replay)
		}
	}
	if err == nil && !rep.OK && row.Detail == "" {
		row.Detail = reportText(rep)
	}
	out.addRow(row)
}
