package fresh_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"snacklab/labsteps/fresh"
)

// TestWriteFileRefusesWhatIsThere: a symlink (dangling or not), a FIFO and
// a file already at the name are refused, and nothing is written through
// them.
func TestWriteFileRefusesWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		plant func(p string) error
	}{
		{"symlink to a file", func(p string) error { return os.Symlink(target, p) }},
		{"dangling symlink", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o666) }},
		{"file", func(p string) error { return os.WriteFile(p, []byte("old"), 0o644) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "planted-"+filepath.Base(t.Name()))
			if err := c.plant(p); err != nil {
				t.Fatal(err)
			}
			err := fresh.WriteFile(p, []byte("lab output"), 0o600)
			if !errors.Is(err, fresh.ErrExists) {
				t.Errorf("WriteFile over a %s: got %v, want an error wrapping ErrExists", c.name, err)
			}
			if b, _ := os.ReadFile(target); string(b) != "original" {
				t.Errorf("target: got %q, want %q", b, "original")
			}
			if _, err := os.Stat(filepath.Join(dir, "nowhere")); !os.IsNotExist(err) {
				t.Errorf("the dangling link's target was created: %v", err)
			}
		})
	}
	p := filepath.Join(dir, "new")
	if err := fresh.WriteFile(p, []byte("ok"), 0o600); err != nil {
		t.Fatalf("WriteFile of a new name: %v", err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: got %v, want 0600", fi.Mode().Perm())
	}
}

// TestReplaceReplacesALinkWithoutFollowingIt.
func TestReplaceReplacesALinkWithoutFollowingIt(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("original"), 0o644)
	p := filepath.Join(dir, "results.json")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	err := fresh.Replace(p, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "original" {
		t.Errorf("target: got %q, want %q", b, "original")
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("results.json: got %v %v, want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("results.json: got %q, want %q", b, "new")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files left in dir: got %d, want 2", len(ents))
	}
}
