package isolate_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/isolate"
)

// The warming build imports what the reference's programs import from
// outside the module, the SQLite driver above all, and builds offline with
// the flags of a submission's build (here on the host, after the tests'
// own static builds have filled its cache with the same packages).
func TestWarmModule(t *testing.T) {
	if b := build(t); b.err != nil {
		t.Fatal(b.err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := isolate.WriteWarmModule(context.Background(), root, dir); err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join(dir, "cmd", "warm", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`_ "modernc.org/sqlite"`, `_ "net/http"`} {
		if !strings.Contains(string(main), want) {
			t.Errorf("cmd/warm/main.go lacks %s:\n%s", want, main)
		}
	}
	for _, bad := range []string{`"snacklab`, `/internal/`, `"internal/`, `"vendor/`} {
		if strings.Contains(string(main), bad) {
			t.Errorf("cmd/warm/main.go imports %s…, which it cannot:\n%s", bad, main)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "warm"), "./cmd/warm")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-mod=readonly -buildvcs=false", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the warm module does not build: %v\n%s", err, out)
	}
}
