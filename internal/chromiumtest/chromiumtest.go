// Package chromiumtest opens pages in headless Chromium for the tests that
// judge what a reader sees (report.html, grades.html, the operations
// dashboard): one way to find the browser, start it, measure a page at a
// width and keep its screenshot, so every page is held to the same rules.
package chromiumtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Widths are the widths every page must read at: a laptop and a phone.
var Widths = []int64{1280, 400}

// Path finds a headless-capable Chromium. Without one the test skips,
// unless SNACKLAB_REQUIRE_CHROMIUM=1 (CI), where it fails.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no chromium on PATH (Debian: apt-get install -y chromium)"
	if os.Getenv("SNACKLAB_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(how + ", and SNACKLAB_REQUIRE_CHROMIUM=1 requires it")
	}
	t.Skip(how + "; set SNACKLAB_REQUIRE_CHROMIUM=1 to fail instead of skipping")
	return ""
}

// New starts a headless Chromium (skipping as Path does without one) with
// a window width×900 and returns a browser context that ends with the
// test or after timeout: a loaded CI machine starts Chromium slowly.
func New(t testing.TB, width int64, timeout time.Duration) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(Path(t)), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(int(width), 900))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancel() })
	return bctx
}

// Glance is what a reader takes in at one width.
type Glance struct {
	// Overflow is how much wider than the page the document is, in px:
	// more than 0 means the reader must scroll the whole page sideways.
	Overflow float64 `json:"overflow"`
	// HTML is the whole page as rendered, attributes (titles) included.
	HTML string `json:"html"`
}

// At sets the viewport to width×900, measures the page and, when
// SNACKLAB_SCREENSHOT_DIR is set, saves its full screenshot there as
// name-width.png.
func At(t testing.TB, ctx context.Context, width int64, name string) Glance {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
		t.Fatalf("chromium: %d px: %v", width, err)
	}
	g, err := chromedp.Run(ctx, chromedp.Evaluate[Glance](`({
		overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
		html: document.documentElement.outerHTML,
	})`))
	if err != nil {
		t.Fatalf("chromium: %d px: %v", width, err)
	}
	Screenshot(t, ctx, fmt.Sprintf("%s-%d.png", name, width))
	return g
}

// Screenshot saves the page's full screenshot as SNACKLAB_SCREENSHOT_DIR/file
// when that is set (CI keeps the directory as an artifact); else nothing.
func Screenshot(t testing.TB, ctx context.Context, file string) {
	t.Helper()
	dir := os.Getenv("SNACKLAB_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: screenshot %s: %v", file, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
