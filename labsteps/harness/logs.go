package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"snacklab/labsteps/fresh"
)

// keepLog registers a process's output, written to LogDir only when the step
// fails or the run keeps its work dirs: a passing step's logs would be
// deleted unread, and creating hundreds of files is most of a run's kernel time.
func (h *Harness) keepLog(base string, output func() (stdout, stderr []byte)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, procLog{base, output})
}

type procLog struct {
	base   string
	output func() (stdout, stderr []byte)
}

// WriteLogs writes every process's stdout and stderr into LogDir, and the
// story into lab.log in the step's root, each as a new file
// (internal/fresh): a name a program planted first (a symlink, a FIFO) is
// refused, never written through.
func (h *Harness) WriteLogs() error {
	if err := os.MkdirAll(h.LogDir, 0o700); err != nil {
		return err
	}
	h.mu.Lock()
	logs := append([]procLog(nil), h.logs...)
	story := h.narr.String()
	h.mu.Unlock()
	errs := []error{fresh.WriteFile(filepath.Join(h.Root, "lab.log"), []byte(story), 0o600)}
	for _, l := range logs {
		out, errb := l.output()
		errs = append(errs, fresh.WriteFile(l.base+".stdout", out, 0o644), fresh.WriteFile(l.base+".stderr", errb, 0o644))
	}
	return errors.Join(errs...)
}

func (h *Harness) logName(what string) string {
	r := h.top()
	r.mu.Lock()
	r.nproc++
	n := r.nproc
	r.mu.Unlock()
	return filepath.Join(h.LogDir, fmt.Sprintf("%02d-%s", n, what))
}
