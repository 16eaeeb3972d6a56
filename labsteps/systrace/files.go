package systrace

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os/exec"
	"strings"
)

// Files lists strace and every file it needs to run — its dynamic loader and
// shared libraries — by the absolute paths it loads them from, so that a
// minimal image (FROM scratch, as the isolated grader's) can carry it: copy
// each file's content to the same path in the image. A static strace is
// listed alone. The libraries are found by the loader itself
// (`ld.so --list`), so the answer is what this machine's strace really loads.
func Files() ([]string, error) {
	path, err := exec.LookPath(stracePath())
	if err != nil {
		return nil, fmt.Errorf("strace not found: install the Debian package strace: %w", err)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				f.Close()
				return nil, fmt.Errorf("read %s's loader: %w", path, err)
			}
			interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	f.Close()
	if interp == "" {
		return []string{path}, nil
	}
	out, err := exec.Command(interp, "--list", path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list %s: %w", interp, path, err)
	}
	files := []string{path, interp}
	seen := map[string]bool{path: true, interp: true}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x…)"; linux-vdso has no file.
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		lib, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(lib, "/") && !seen[lib] {
			seen[lib] = true
			files = append(files, lib)
		}
	}
	return files, sc.Err()
}
