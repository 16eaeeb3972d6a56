package ops_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
)

// TestDashboardShowsEveryAttempt: a job that died after a 503, a timeout and
// a BadAck shows all three attempts with their times in the dead list.
func TestDashboardShowsEveryAttempt(t *testing.T) {
	const at = int64(1_796_000_000_000)
	q, _ := opstest.DiedAfterThree(t, at)
	srv := httptest.NewServer(ops.NewDashboard(q, func() int64 { return at + 600_000 }))
	t.Cleanup(srv.Close)
	resp, body := get(t, http.MethodGet, srv.URL+"/")
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
	for _, want := range []string{
		"<div>#1 retry 503 http at 2026-11-30T00:53:20.000Z (10m00s ago)</div>",
		"<div>#2 retry timeout at 2026-11-30T00:54:20.000Z (9m00s ago)</div>",
		"<div>#3 undecided 200 badack at 2026-11-30T00:55:20.000Z (8m00s ago)</div>",
		`<td class="investigation"><span class="muted">not yet</span></td>`,
		`id="ratio-exhausted">1 of 1<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func TestHonestRatio(t *testing.T) {
	for _, c := range []struct {
		n, dead int64
		want    string
	}{
		{1, 1, "1 of 1"},
		{0, 0, "0 of 0"},
		{3, 19, "3 of 19"},
		{9, 20, "45.0% (9 of 20)"},
	} {
		if got := ops.HonestRatio(c.n, c.dead); got != c.want {
			t.Errorf("HonestRatio(%d, %d) = %q, want %q", c.n, c.dead, got, c.want)
		}
	}
}
