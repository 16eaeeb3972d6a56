package ops

import (
	"fmt"
	"time"
)

// HumanDuration is an age as an operator reads it at a glance: the two
// largest units, rounded down, the second padded where it reads as a clock
// ("45s", "7m12s", "2h05m", "3d4h"). Milliseconds ("7m11.905s") are noise
// on a quarantine measured in minutes and days; the JSON keeps the exact
// age_ms.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

// humanExact reports whether HumanDuration shows d without rounding.
func humanExact(d time.Duration) bool {
	switch {
	case d < time.Hour:
		return d%time.Second == 0
	case d < 24*time.Hour:
		return d%time.Minute == 0
	}
	return d%time.Hour == 0
}
