package labsteps

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

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

// writeLogs writes every process's stdout and stderr, and the story, into the work dir.
func (h *Harness) writeLogs() error {
	if err := os.MkdirAll(h.LogDir, 0o755); err != nil {
		return err
	}
	h.mu.Lock()
	logs := append([]procLog(nil), h.logs...)
	h.mu.Unlock()
	var errs []error
	for _, l := range logs {
		out, errb := l.output()
		errs = append(errs, os.WriteFile(l.base+".stdout", out, 0o644), os.WriteFile(l.base+".stderr", errb, 0o644))
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
