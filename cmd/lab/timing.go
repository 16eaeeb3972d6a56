package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// How long lab run took: the wall times of repeated runs, and -timing's
// floor beside them.

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func minD(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxD(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// reportFloor prints the run's wall time beside its floor: what the process
// starts and commits it needed cost on this machine, measured right now.
func reportFloor(ctx context.Context, cfg labsteps.Config, results []result.Result, wall time.Duration, runs int, w io.Writer) error {
	f, err := harness.MeasureFloor(ctx, cfg.Bin, cfg.WorkRoot, results)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "timing: wall %.3fs (median of %d run(s) of the selected steps)\n", wall.Seconds(), runs)
	fmt.Fprintf(w, "timing: floor = %d process starts × %.2fms + %d commits × %.2fms = %.3fs of serial work, %.3fs over %d cores",
		f.Procs, ms(f.Start), f.Commits, ms(f.Commit), f.Serial.Seconds(), f.Parallel.Seconds(), f.Cores)
	if f.Waits > 0 {
		fmt.Fprintf(w, ", plus %.3fs waiting for the real clock (step 8c's lease)", f.Waits.Seconds())
	}
	fmt.Fprintf(w, "\ntiming: (one start and one commit measured just now, median of %d each)\n", f.Samples)
	if f.Parallel > 0 {
		fmt.Fprintf(w, "timing: wall / floor = %.1f× the %d-core floor", wall.Seconds()/f.Parallel.Seconds(), f.Cores)
		if f.Waits > 0 && wall > f.Waits {
			fmt.Fprintf(w, " (%.1f× without the real-clock wait)", (wall-f.Waits).Seconds()/f.Parallel.Seconds())
		}
		fmt.Fprintf(w, ", %.1f× the serial floor\n", wall.Seconds()/f.Serial.Seconds())
	}
	if cfg.Calibration != nil {
		fmt.Fprintf(w, "timing: calibration before the run: %s (took %.3fs)\n", *cfg.Calibration, cfg.Calibration.Took.Seconds())
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
