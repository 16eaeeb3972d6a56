package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"snacklab/labsteps/model"
)

const modelUsage = `usage: lab model --bin DIR [--seed N] [--ops N] [--seeds K] [--json]

Plays seeded random sequences of queuectl operations (enqueue, claim, finish,
redrive, show, stats under the injected clock, aimed at every lease, backoff
and deadline boundary) against DIR/queuectl, each on a fresh queue file, and
compares every exit code and pinned JSON member with a model of CONTRACT.md
§2–§3. The first mismatch is shrunk to the shortest sequence that still
fails and printed as commands to paste. Exit 0: every sequence matched; 1: a
mismatch (printed); 2: usage.

flags:
`

// modelFlags are lab model's flags; main only wires them to labsteps/model.
type modelFlags struct {
	bin          string
	seed         uint64
	ops, seeds   int
	shrinkBudget int
	json         bool
}

func parseModelFlags(args []string, stdout io.Writer) (*modelFlags, error) {
	var f modelFlags
	fs := flag.NewFlagSet("lab model", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.bin, "bin", "", "directory holding the queuectl under test (default: the directory of this program)")
	fs.Uint64Var(&f.seed, "seed", 1, "first seed; the same seed replays the same sequence")
	fs.IntVar(&f.ops, "ops", 40, "operations per sequence (1 … 10000)")
	fs.IntVar(&f.seeds, "seeds", 10, "sequences to play, seeds seed … seed+K-1 (1 … 100000)")
	fs.IntVar(&f.shrinkBudget, "shrink", 300, "at most this many replays while shrinking (0: report unshrunk)")
	fs.BoolVar(&f.json, "json", false, "print the verdict as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, modelUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, nil
		}
		return nil, usageErr{fmt.Sprintf("model: %v. Try: lab model -h", err)}
	}
	switch {
	case fs.NArg() > 0:
		return nil, usageErr{fmt.Sprintf("model: unexpected %q. Try: lab model --bin bin --seed 7", fs.Arg(0))}
	case f.ops < 1 || f.ops > 10000:
		return nil, usageErr{fmt.Sprintf("model: --ops %d is outside 1 … 10000", f.ops)}
	case f.seeds < 1 || f.seeds > 100000:
		return nil, usageErr{fmt.Sprintf("model: --seeds %d is outside 1 … 100000", f.seeds)}
	case f.shrinkBudget < 0:
		return nil, usageErr{fmt.Sprintf("model: --shrink %d is negative", f.shrinkBudget)}
	}
	return &f, nil
}

// modelVerdict is lab model --json's answer.
type modelVerdict struct {
	Bin      string   `json:"bin"`
	Seeds    []uint64 `json:"seeds"`
	Ops      int      `json:"ops"`
	OK       bool     `json:"ok"`
	Seed     uint64   `json:"seed,omitempty"`
	Commands []string `json:"commands,omitempty"`
	Op       string   `json:"operation,omitempty"`
	Expected string   `json:"expected,omitempty"`
	Observed string   `json:"observed,omitempty"`
	Diff     string   `json:"diff,omitempty"`
	Clause   string   `json:"clause,omitempty"`
}

func runModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseModelFlags(args, stdout)
	if err != nil || f == nil {
		return err
	}
	bin := f.bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		bin = filepath.Dir(exe)
	}
	q, err := filepath.Abs(filepath.Join(bin, "queuectl"))
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if fi, err := os.Stat(q); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return usageErr{fmt.Sprintf("model: %s is not an executable queuectl. Try: lab model --bin DIR", q)}
	}
	work, err := os.MkdirTemp("", "snacklab-model-*")
	if err != nil {
		return fmt.Errorf("model: work dir: %w", err)
	}
	defer os.RemoveAll(work)
	r := &model.Runner{Queuectl: q, Dir: work}
	v := modelVerdict{Bin: bin, Ops: f.ops, OK: true}
	for i := range f.seeds {
		seed := f.seed + uint64(i)
		v.Seeds = append(v.Seeds, seed)
		m, err := model.Seed(ctx, r, seed, f.ops, f.shrinkBudget)
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if m == nil {
			continue
		}
		v.OK, v.Seed, v.Op, v.Diff, v.Clause = false, seed, m.Ops[m.Step].Verb, m.Diff, m.Expected.Clause
		v.Commands = m.Commands("q.db")
		exp, _ := json.Marshal(m.Expected.JSON)
		v.Expected = fmt.Sprintf("exit %d, %s", m.Expected.Exit, exp)
		v.Observed = fmt.Sprintf("exit %d, %s", m.Observed.Exit, m.Observed.Stdout)
		if !f.json {
			fmt.Fprintf(stdout, "lab model: %s departs from the model of CONTRACT.md\n%sreplay:    lab model --bin %s --seed %d --ops %d --seeds 1\n",
				q, m.Report(seed), bin, seed, f.ops)
		}
		break
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	} else if v.OK {
		fmt.Fprintf(stdout, "lab model: %s matched the model on %d sequences of %d operations (seeds %d … %d)\n",
			q, f.seeds, f.ops, f.seed, f.seed+uint64(f.seeds)-1)
	}
	if !v.OK {
		return failed{1, len(v.Seeds)}
	}
	return nil
}
