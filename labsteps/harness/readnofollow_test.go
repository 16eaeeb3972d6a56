package harness_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/labsteps/harness"
)

// What a program plants at the queue's name is refused with the reason,
// never followed, never waited on (a FIFO with no writer), never read past
// the cap (a sparse file).
func TestReadNoFollow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
		want  string // "" for the content "queue"
	}{
		{"regular file", func(t *testing.T, p string) { write(t, p, "queue") }, ""},
		{"FIFO", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "queue.db is not a regular file (p"},
		{"symbolic link", func(t *testing.T, p string) {
			write(t, p+".real", "queue")
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, "queue.db is a symbolic link"},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "queue.db is not a regular file (d"},
		{"sparse file past the cap", func(t *testing.T, p string) {
			write(t, p, "")
			if err := os.Truncate(p, harness.MaxQueueFile+1); err != nil {
				t.Fatal(err)
			}
		}, "queue.db is past the lab's cap of 256 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "queue.db")
			tc.plant(t, p)
			b, err := harness.ReadNoFollow(p)
			switch {
			case tc.want == "" && (err != nil || string(b) != "queue"):
				t.Errorf("got %q, %v; want %q", b, err, "queue")
			case tc.want != "" && (err == nil || !errors.Is(err, harness.ErrJudgedFile) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %d bytes, %v; want ErrJudgedFile saying %q", len(b), err, tc.want)
			}
		})
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
