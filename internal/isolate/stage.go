package isolate

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"snacklab/containers"
	"snacklab/labsteps"
)

// maxProgram bounds the size of one submitted program copied for grading.
const maxProgram = 1 << 30

// staged is the private copy of a submission that the container sees.
type staged struct {
	root string // remove it when done
	sub  string // bind-mounted read-only at /sub
}

// stageSubmission copies queuectl, sender and receiver from dir into a new
// private directory under parent: the container reads that copy, never the
// submission's directory. This way the container's user can read the
// programs whoever owns them on the host (they are copied as root-owned
// 0555 files in a 0755 directory, inside a 0700 one that other host users
// cannot enter), nothing else from the submission's directory is exposed
// (other files, symlinks to the host's files), and the submission cannot
// change while it is graded.
//
// A program that is missing, not a regular executable file, a symlink
// leading out of dir, or not a static ELF executable (the container has no
// libc and no interpreter) is the submission's problem: it comes back as
// problem, and no container need run. err is the grader's own failure.
func stageSubmission(parent, dir string) (st staged, problem string, err error) {
	root, err := os.MkdirTemp(parent, "snacklab-isolate-*")
	if err != nil {
		return st, "", err
	}
	st = staged{root: root, sub: filepath.Join(root, "sub")}
	if err := os.Mkdir(st.sub, 0o755); err != nil {
		os.RemoveAll(root)
		return staged{}, "", err
	}
	if err := os.Chmod(st.sub, 0o755); err != nil { // whatever the umask
		os.RemoveAll(root)
		return staged{}, "", err
	}
	var problems []string
	for _, p := range labsteps.Programs {
		why, err := copyProgram(dir, p, filepath.Join(st.sub, p))
		if err != nil {
			os.RemoveAll(root)
			return staged{}, "", fmt.Errorf("isolate: staging %s: %w", p, err)
		}
		if why != "" {
			problems = append(problems, why)
		}
	}
	return st, strings.Join(problems, "; "), nil
}

// copyProgram copies dir/name to dst as a 0555 file, or says why it cannot
// be graded; err is a failure to write the copy.
func copyProgram(dir, name, dst string) (why string, err error) {
	src := filepath.Join(dir, name)
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Sprintf("%s: missing from the submission (want executables queuectl, sender and receiver)", name), nil
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(src)
		base, berr := filepath.EvalSymlinks(dir)
		if err != nil || berr != nil {
			return fmt.Sprintf("%s: a symlink that does not resolve", name), nil
		}
		if !strings.HasPrefix(real, base+string(filepath.Separator)) {
			return fmt.Sprintf("%s: a symlink leading out of the submission's directory (to %s)", name, real), nil
		}
		src = real
		if fi, err = os.Lstat(src); err != nil {
			return fmt.Sprintf("%s: %v", name, err), nil
		}
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("%s: not a regular file", name), nil
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Sprintf("%s is not an executable file", name), nil
	}
	if fi.Size() > maxProgram {
		return fmt.Sprintf("%s: %d bytes, more than the %d MiB a program may have", name, fi.Size(), maxProgram>>20), nil
	}
	// O_NOFOLLOW|O_NONBLOCK: never follow a symlink swapped in since the
	// Lstat, never block on a FIFO; the fstat below decides.
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Sprintf("%s: %v", name, err), nil
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Sprintf("%s: not a regular file", name), nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return "", err
	}
	_, cerr := io.Copy(out, io.LimitReader(in, maxProgram))
	if err := out.Close(); cerr == nil {
		cerr = err
	}
	if cerr == nil {
		cerr = os.Chmod(dst, 0o555)
	}
	if cerr != nil {
		return "", cerr
	}
	if err := containers.CheckStatic(dst); err != nil {
		return strings.Replace(err.Error(), dst, name, 1) + " (isolated grading runs it in an empty, FROM scratch container)", nil
	}
	return "", nil
}
