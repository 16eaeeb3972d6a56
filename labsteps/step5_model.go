package labsteps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/model"
)

// The generated model part's bounds. The seeds are fixed, so every run
// plays the same sequences and gives the same verdict. They were chosen from
// the model alone, not from the bundled mutants: of seeds 1–300, the three
// whose sequences together reach the most of the model's answers (each
// clause an answer names, and each again on a job redriven before it, where
// a fresh budget meets an old token); seeds 1–3 reach 31 of those 38, these
// 34. A passing implementation costs len(modelSeeds) × (modelOps + 1)
// queuectl starts (an init and the operations); a failing one at most
// modelShrink replays more, each no longer than the failure.
var modelSeeds = []uint64{98, 1, 46}

const (
	modelOps    = 40
	modelShrink = 30
)

// modelSequences is the generated part of step 5: seeded random sequences of
// enqueue, claim, finish, redrive, show and stats under the injected clock,
// aimed at every lease, backoff and deadline boundary (labsteps/model), each
// played on a fresh queue file and every exit code and JSON member the
// contract pins compared with a model of CONTRACT §2–§3. The first mismatch
// is shrunk to the shortest sequence that still fails and shown as commands
// to paste. A mismatch is a wrong answer; a process the lab could not start
// is its own trouble (the step is not judged), and a wait that ran out a
// timeout, as everywhere (harness.Exec).
func modelSequences(h *harness.Harness) {
	parts := make([]harness.Part, len(modelSeeds))
	for i, seed := range modelSeeds {
		// One sequence each, at once: they share nothing but the program.
		parts[i] = harness.Part{Name: fmt.Sprintf("seed %d", seed), Run: func(sub *harness.Harness) { modelSeed(sub, seed) }}
	}
	h.Parallel(parts...)
}

// modelSeed plays one seed's sequence and judges it.
func modelSeed(h *harness.Harness, seed uint64) {
	// Every clause a model answer or difference can name (the registry reads
	// the ids from the source; TestModelNamesEveryClause holds the list to
	// the model).
	h.Clause("§2.enqueue.new", "§2.enqueue.dup", "§2.enqueue.conflict",
		"§2.claim.due", "§2.claim.grant", "§2.claim.order", "§2.claim.expiry",
		"§2.claim.sweep.exhausted", "§2.claim.sweep.deadline",
		"§2.finish.ok", "§2.finish.permanent", "§2.finish.retry.pending", "§2.finish.retry.exhausted",
		"§2.finish.retry.deadline", "§2.finish.fence", "§2.finish.not-applied",
		"§2.redrive.refused", "§2.redrive.reset", "§3.show.unknown", "§3.show.json", "§3.stats.json",
		"§3.stdout.refusal", "§3.json.one")
	r := &model.Runner{Dir: h.Dir, Name: fmt.Sprintf("model-seed%d-", seed), Keep: true, Exec: func(_ context.Context, args []string) (model.Observed, error) {
		run := h.Exec("queuectl", args...) // a step out of time ends here, as a timeout
		if run.Code == -1 && run.Signal == "" {
			return model.Observed{}, fmt.Errorf("%s: %s", run.Cmdline(), strings.TrimSpace(run.Stderr))
		}
		return model.Observed{Exit: run.Code, Signal: run.Signal, Stdout: run.Stdout, Stderr: run.Stderr}, nil
	}}
	m, err := model.Seed(context.Background(), r, seed, modelOps, modelShrink)
	switch {
	case errors.Is(err, model.ErrInit):
		h.Clause("§3.init.json")
		h.Fatalf(fmt.Sprintf("generated: model, seed %d: queuectl init of a fresh queue file", seed), "exit 0", "every sequence starts on a file init made",
			"%v", err)
	case err != nil:
		// Not a verdict: a process the lab could not start says nothing
		// of the implementation. A panic that is not a failed check makes
		// the step ERROR (not judged).
		panic(fmt.Errorf("generated model part: %w", err))
	case m != nil:
		h.Clause(m.Clauses()...)
		h.Check(fmt.Sprintf("generated: model, seed %d: %s departs from the model (a replay of %d commands)", seed, m.Ops[m.Step].Verb, len(m.Ops)+1),
			false, expected(m), observed(m),
			fmt.Sprintf("the contract decides every answer of this sequence (%s); shrunk to the shortest sequence that still fails, replay it with these commands:\n%s",
				m.Expected.Clause, replay(m)))
	}
	h.Check(fmt.Sprintf("generated: model, seed %d: %d operations", seed, modelOps), true, "",
		"every exit code and pinned JSON member as the model of CONTRACT §2–§3 says", "")
}

// expected is the model's answer to the failing command.
func expected(m *model.Mismatch) string {
	if m.Expected.JSON == nil {
		return fmt.Sprintf("exit %d and nothing on stdout", m.Expected.Exit)
	}
	b, err := json.Marshal(m.Expected.JSON)
	if err != nil {
		return fmt.Sprintf("exit %d and %v", m.Expected.Exit, m.Expected.JSON)
	}
	return fmt.Sprintf("exit %d and %s (members not named are free)", m.Expected.Exit, b)
}

// observed is what the failing command answered, and how it differs: its
// stderr's first line too, when it said something, since that line is
// often the cause (a verb "not implemented", which the summary then names
// once as what blocks the part).
func observed(m *model.Mismatch) string {
	o := m.Observed
	how := harness.ExitText(o.Exit, o.Signal)
	if line, _, _ := strings.Cut(strings.TrimSpace(o.Stderr), "\n"); line != "" {
		how += " (stderr: " + harness.Trim(line) + ")"
	}
	return fmt.Sprintf("%s, stdout %s — %s", how, harness.Trim(strings.TrimSpace(o.Stdout)), m.Diff)
}

// replay is the shrunk sequence as commands a learner can paste.
func replay(m *model.Mismatch) string {
	return "  " + strings.Join(m.Commands("q.db"), "\n  ")
}
