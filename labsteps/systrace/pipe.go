package systrace

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// PipeName is the name strace -y gives the pipe that f is an end of,
// "pipe:[INODE]" (both ends of a pipe share its inode). It is how the lab
// knows its own pipe in a trace: a program's output is what reaches the pipe
// the lab gave it, written by any process of the traced tree (a wrapper
// script, a version manager's shim, an interpreter, their children), and not
// whatever some process writes to its descriptor 1, which in a shim's command
// substitution is a pipe of the shim's own.
func PipeName(f *os.File) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("pipe name: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode()&os.ModeNamedPipe == 0 {
		return "", fmt.Errorf("pipe name: %s is not a pipe (mode %v)", f.Name(), fi.Mode())
	}
	return "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]", nil
}

// ToFile is a report predicate: a write to the file strace names name (a
// pipe's PipeName, a path), through any descriptor, by any process or thread
// in the trace. Writes to descriptor 1 that lead elsewhere do not count.
func ToFile(name string) func(Call) bool {
	return func(c Call) bool { return IsWrite(c.Name) && c.Path == name }
}
