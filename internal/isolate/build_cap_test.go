package isolate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/isolate"
)

// TestBuiltProgramOverTheCapIsNotKept: an executable larger than
// MaxBuiltProgram is refused with a message naming it, and nothing is
// left at the output path. (The file is sparse: no disk is used.)
func TestBuiltProgramOverTheCapIsNotKept(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "queuectl"), filepath.Join(dir, "out-queuectl")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(isolate.MaxBuiltProgram + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	why, err := isolate.CopyOut(src, dst)
	if err != nil {
		t.Fatalf("CopyOut: %v", err)
	}
	if want := "the build's queuectl is 65 MiB, more than the 64 MiB an executable may have"; !strings.Contains(why, want) {
		t.Errorf("got %q; want it to say %q", why, want)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Errorf("output path: got %v; want nothing there", err)
	}
}
