package crash

import "context"

// SoakReport is the random soak's outcome.
type SoakReport struct {
	Seed       int64       `json:"seed"`
	Kills      int         `json:"kills"`
	Procs      int         `json:"processes"`
	Violations []Violation `json:"violations"`
}

// Soak runs the random soak.
func Soak(ctx context.Context, cfg Config, dir string, progress func(string)) (*SoakReport, error) {
	return &SoakReport{Seed: cfg.Seed}, nil
}
