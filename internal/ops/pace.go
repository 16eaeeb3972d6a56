package ops

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"snacklab/queue"
)

// Waiter paces a bulk redrive: Wait returns when the next job may go, or
// with ctx's error when the operator gave up. *rate.Limiter satisfies it.
type Waiter interface {
	Wait(ctx context.Context) error
}

// Clock is the time a Pacer sees. Tests inject one whose Sleep only moves
// time forward, so the pacing is checked exactly and without waiting.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pacer is a token bucket (golang.org/x/time/rate) with a burst of one, read
// through a Clock. A burst of one is the point: after an outage the first
// jobs must not go out in a clump that recreates the load.
type Pacer struct {
	lim   *rate.Limiter
	clock Clock
}

// NewPacer lets perSecond jobs go per second at most, timed by clock (nil
// means the wall clock).
func NewPacer(perSecond float64, clock Clock) *Pacer {
	if clock == nil {
		clock = RealClock{}
	}
	return &Pacer{lim: rate.NewLimiter(rate.Limit(perSecond), 1), clock: clock}
}

// Wait takes one token, sleeping on the clock until there is one. The token
// is taken at the instant Wait returns, not at a reserved instant in the
// future: if a sleep overshoots, the next job is still a full interval after
// this one, so the rate holds for the redrives as they really happen, not
// only on the limiter's books.
func (p *Pacer) Wait(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := p.clock.Now()
		if p.lim.AllowN(now, 1) {
			return nil
		}
		missing := 1 - p.lim.TokensAt(now)
		d := time.Duration(math.Ceil(missing / float64(p.lim.Limit()) * float64(time.Second)))
		if err := p.clock.Sleep(ctx, max(d, time.Nanosecond)); err != nil {
			return err
		}
	}
}

// MaxRate bounds --rate: faster than this is not pacing.
const MaxRate = 1000

// ParseRate reads a rate such as "5/s", "0.5/s", "30/m" or "600/h" into jobs
// per second. The unit is required so that nobody types 100 meaning per
// minute and gets per second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(s, "/")
	per := map[string]float64{"s": 1, "m": 60, "min": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !ok || per == 0 || err != nil || !(n > 0) {
		return 0, fmt.Errorf("%w: rate %q: want N/s, N/m or N/h with N > 0, e.g. 5/s", queue.ErrInvalid, s)
	}
	r := n / per
	if r > MaxRate {
		return 0, fmt.Errorf("%w: rate %q: at most %d/s", queue.ErrInvalid, s, MaxRate)
	}
	return r, nil
}
