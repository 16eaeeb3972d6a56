package ops_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
)

func dashboardServer(t *testing.T) (*httptest.Server, func() ops.Report) {
	t.Helper()
	q, _ := opstest.Known(t)
	srv := httptest.NewServer(ops.NewDashboard(q, func() int64 { return opstest.Now }))
	t.Cleanup(srv.Close)
	return srv, func() ops.Report { return collect(t, q, opstest.Now) }
}

func get(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestDashboardPage(t *testing.T) {
	srv, _ := dashboardServer(t)
	resp, body := get(t, http.MethodGet, srv.URL+"/")
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Fatalf("status %d, want %d: %s", got, want, body)
	}
	if got, want := resp.Header.Get("Content-Type"), "text/html; charset=utf-8"; got != want {
		t.Fatalf("content type %q, want %q", got, want)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("CSP %q: want default-src 'none'", csp)
	}
	for _, want := range []string{
		`id="count-dead">6<`, `id="dead-exhausted">3<`, `id="ratio-exhausted">3 of 6<`,
		`<span id="oldest-id">perm-1</span>`, `id="redriven-in-flight">3<`, `<svg id="reason-chart"`,
		`<rect data-reason="exhausted" data-count="3" x="100" y="38" width="300"`,
		`<rect data-reason="permanent" data-count="2" x="100" y="6" width="200"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if !strings.Contains(body, `id="no-thresholds"`) || strings.Contains(body, `class="crossed"`) {
		t.Error("without thresholds the page should say none are set and highlight nothing")
	}
	if got, want := strings.Count(body, "<tr data-id="), opstest.Dead; got != want {
		t.Errorf("dead rows %d, want %d", got, want)
	}
	if strings.Contains(body, opstest.QtyMarker) || strings.Contains(body, "qty") {
		t.Error("page shows order content")
	}
	if m := regexp.MustCompile(`(?i)\b(src|href|action)=|<(script|link|img|iframe|form)\b|@import|url\(`).FindString(body); m != "" {
		t.Errorf("page loads or posts elsewhere: %s", m)
	}
	if got := strings.ReplaceAll(body, `xmlns="http://www.w3.org/2000/svg"`, ""); strings.Contains(got, "://") {
		t.Error("page names an external address")
	}
}

func TestDashboardIsReadOnly(t *testing.T) {
	srv, report := dashboardServer(t)
	before := report()
	for _, path := range []string{"/", "/metrics", "/redrive", "/nope"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, "REDRIVE"} {
			resp, _ := get(t, method, srv.URL+path)
			if got, want := resp.StatusCode, http.StatusMethodNotAllowed; got != want {
				t.Errorf("%s %s: status %d, want %d", method, path, got, want)
			}
			if got, want := resp.Header.Get("Allow"), "GET, HEAD"; got != want {
				t.Errorf("%s %s: Allow %q, want %q", method, path, got, want)
			}
		}
	}
	for _, c := range []struct {
		method, path string
		status       int
		body         bool
	}{
		{http.MethodGet, "/", 200, true},
		{http.MethodHead, "/", 200, false},
		{http.MethodGet, "/metrics", 200, true},
		{http.MethodHead, "/metrics", 200, false},
		{http.MethodGet, "/nope", 404, true},
		{http.MethodGet, "/redrive", 404, true},
	} {
		resp, body := get(t, c.method, srv.URL+c.path)
		if resp.StatusCode != c.status || (body != "") != c.body {
			t.Errorf("%s %s: status %d body %d bytes, want %d with body %v", c.method, c.path, resp.StatusCode, len(body), c.status, c.body)
		}
	}
	after := report()
	if after.Redrives != before.Redrives || after.Counts["dead"] != before.Counts["dead"] || after.Investigations != before.Investigations {
		t.Fatal("the queue changed under HTTP requests")
	}
}

func TestDashboardMetrics(t *testing.T) {
	srv, report := dashboardServer(t)
	resp, body := get(t, http.MethodGet, srv.URL+"/metrics")
	if got, want := resp.Header.Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8"; got != want {
		t.Fatalf("content type %q, want %q", got, want)
	}
	samples := parseProm(t, body)
	r := report()
	if got, want := samples[`snacklab_queue_dead_jobs{reason="exhausted"}`], float64(r.DeadByReason["exhausted"]); got != want {
		t.Fatalf("dead exhausted %v, want %v", got, want)
	}
	if got, want := samples[`snacklab_queue_oldest_dead_age_seconds`], 98.0; got != want {
		t.Fatalf("oldest age %v, want %v", got, want)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	q, _ := opstest.Known(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- ops.Serve(ctx, "127.0.0.1:0", ops.NewDashboard(q, nil), func(a net.Addr) { addrs <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening after 10s")
	}
	resp, _ := get(t, http.MethodGet, "http://"+addr.String()+"/")
	if got, want := resp.StatusCode, 200; got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10s after cancel")
	}
}
