package containers_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// testContext bounds a test's work by the test binary's own deadline (go
// test -timeout, 10 minutes by default) less a margin for cleanup, instead of
// a fixed limit of its own: building the image's binaries on a shared
// machine under load took more than two minutes, and a fixed two-minute
// context killed a build that would have succeeded. Without a deadline
// (-timeout 0) it allows 30 minutes.
func testContext(t *testing.T) context.Context {
	t.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	if d, ok := t.Deadline(); ok {
		margin := min(30*time.Second, time.Until(d)/10)
		deadline = d.Add(-margin)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// explain says why an operation failed when it was the test's own time
// limit that stopped it, so that a busy machine is not mistaken for a bug.
func explain(ctx context.Context, started time.Time, err error) string {
	if ctx.Err() == nil {
		return err.Error()
	}
	d, _ := ctx.Deadline()
	return fmt.Sprintf("stopped after %v by the test's time limit (its context ended at %s: go test -timeout less a margin; the machine may be busy, "+
		"raise -timeout rather than suspect the code): %v", time.Since(started).Round(time.Second), d.Format(time.TimeOnly), err)
}
