package result_test

import (
	"fmt"
	"testing"
	"time"

	"snacklab/labsteps/result"
)

func TestDeriveLimits(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name      string
		cal       result.Calibration
		load      float64
		timeout   time.Duration
		wantWait  time.Duration
		wantStep  time.Duration
		wantDrain time.Duration
	}{
		{"fast and idle: the floors", result.Calibration{Start: 3 * ms, Listen: 9 * ms}, 0.2, 0, 10 * time.Second, time.Minute, 5 * time.Second},
		{"slow start: 40 starts a wait, 400 a step", result.Calibration{Start: 300 * ms, Listen: 320 * ms}, 0, 0, 12800 * ms, 128 * time.Second, 6400 * ms},
		{"busy machine: floors scaled by load per core", result.Calibration{Start: 3 * ms, Load: 3}, 2, 0, 30 * time.Second, 3 * time.Minute, 15 * time.Second},
		{"load seen now counts too", result.Calibration{Start: 3 * ms}, 4, 0, 40 * time.Second, 4 * time.Minute, 20 * time.Second},
		{"scaling stops at 10", result.Calibration{Start: 3 * ms, Load: 25}, 0, 0, 100 * time.Second, 10 * time.Minute, 50 * time.Second},
		{"--timeout fixes the step limit only", result.Calibration{Start: 300 * ms}, 0, 90 * time.Second, 12 * time.Second, 90 * time.Second, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := result.DeriveLimits(tc.cal, tc.load, tc.timeout)
			if got, want := fmt.Sprint(l.Wait, l.Step, l.Drain), fmt.Sprint(tc.wantWait, tc.wantStep, tc.wantDrain); got != want {
				t.Errorf("DeriveLimits(%+v, %v, %v): wait, step, drain = %s, want %s", tc.cal, tc.load, tc.timeout, got, want)
			}
		})
	}
}
