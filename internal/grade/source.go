package grade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Bounds of a module submission's source tree.
const (
	maxSourceFiles = 20000
	maxSourceBytes = 256 << 20
)

// ErrSource wraps every reason CheckSource refuses a tree: the submission's
// problem, shown to the learner, not the grader's failure.
var ErrSource = errors.New("the submission's source cannot be built as it is")

// CheckSource walks a module submission's tree without following links and
// refuses what would let a build read outside the submission or hang: a
// symbolic link (a package directory linked to a classmate's, a .go file
// linked to a host file), a FIFO (a go.mod that blocks the build), a
// device or socket, a file name holding control characters (it would reach
// the teacher's console inside a compiler error), a go.mod `replace`
// pointing to a directory outside the submission, and trees beyond
// maxSourceFiles files or maxSourceBytes bytes. The error says which file
// and why, with paths relative to the submission.
func CheckSource(dir string) error {
	files, size := 0, int64(0)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSource, Clean(rel), errors.Unwrap(err))
		}
		if badName(d.Name()) {
			return fmt.Errorf("%w: a file name holds control or invisible characters (%q); rename it", ErrSource, rel)
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			// The target is not shown: it names the grading machine's paths.
			return fmt.Errorf("%w: %s is a symbolic link; the grader builds only the files you submitted: copy the file or directory in its place", ErrSource, rel)
		case t.IsDir():
			return nil
		case !t.IsRegular():
			return fmt.Errorf("%w: %s is not a regular file (%v): submit regular files and directories only", ErrSource, rel, t.Type())
		}
		files++
		if fi, err := d.Info(); err == nil {
			size += fi.Size()
		}
		if files > maxSourceFiles || size > maxSourceBytes {
			return fmt.Errorf("%w: more than %d files or %d MiB", ErrSource, maxSourceFiles, maxSourceBytes>>20)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return checkReplaces(dir)
}

// badName reports a name with control characters or invisible format
// characters (bidi overrides).
func badName(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

// checkReplaces refuses go.mod replace directives whose target is a
// directory outside the submission (a classmate's copy next to it, a
// directory of the host). Module-path targets (example.com/x v1.2.3) come
// from the module cache, offline, and are fine.
func checkReplaces(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("%w: go.mod: %v", ErrSource, errors.Unwrap(err))
	}
	inBlock := false
	for n, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case inBlock && f[0] == ")":
			inBlock = false
			continue
		case f[0] == "replace" && len(f) == 2 && f[1] == "(":
			inBlock = true
			continue
		case f[0] == "replace":
			f = f[1:]
		case !inBlock:
			continue
		}
		i := indexOf(f, "=>")
		if i < 0 || i+1 >= len(f) {
			continue
		}
		target := strings.Trim(f[i+1], `"`)
		if !localPath(target) {
			continue
		}
		abs := target
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(dir, target)
		}
		if rel, err := filepath.Rel(dir, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(target) {
			return fmt.Errorf("%w: go.mod:%d replaces a module with %s, a directory outside your submission; the grader builds only the files you submitted: put the code inside your module", ErrSource, n+1, cleanLine(target))
		}
	}
	return nil
}

func indexOf(f []string, s string) int {
	for i, x := range f {
		if x == s {
			return i
		}
	}
	return -1
}

// localPath reports a replace target that is a file path, as cmd/go reads
// it: absolute, or starting with ./ or ../ (or . and .. themselves).
func localPath(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
}
