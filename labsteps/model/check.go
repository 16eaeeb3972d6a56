package model

import (
	"context"
	"fmt"
)

// Seed checks one seeded sequence of n operations and, on a mismatch,
// shrinks it (at most shrinkBudget replays) before returning it.
func Seed(ctx context.Context, r *Runner, seed uint64, n, shrinkBudget int) (*Mismatch, error) {
	m, err := r.Failing(ctx, Generate(seed, n))
	if err != nil || m == nil {
		return nil, wrap(seed, err)
	}
	m, err = Shrink(ctx, r, m, shrinkBudget)
	return m, wrap(seed, err)
}

func wrap(seed uint64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("seed %d: %w", seed, err)
}
