package ops_test

import (
	"testing"
	"time"

	"snacklab/internal/ops"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{999 * time.Millisecond, "0s"},
		{45*time.Second + 900*time.Millisecond, "45s"},
		{time.Minute, "1m00s"},
		{7*time.Minute + 11905*time.Millisecond, "7m11s"},
		{59*time.Minute + 59*time.Second, "59m59s"},
		{time.Hour, "1h00m"},
		{2*time.Hour + 5*time.Minute + 30*time.Second, "2h05m"},
		{23*time.Hour + 59*time.Minute, "23h59m"},
		{24 * time.Hour, "1d0h"},
		{3*24*time.Hour + 4*time.Hour + 59*time.Minute, "3d4h"},
		{400 * 24 * time.Hour, "400d0h"},
	} {
		if got := ops.HumanDuration(tc.in); got != tc.want {
			t.Errorf("HumanDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
