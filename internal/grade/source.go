package grade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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
	var asm []string // assembler files, relative to dir
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
		if strings.EqualFold(filepath.Ext(p), ".s") {
			asm = append(asm, rel)
		}
		if files > maxSourceFiles || size > maxSourceBytes {
			return fmt.Errorf("%w: more than %d files or %d MiB", ErrSource, maxSourceFiles, maxSourceBytes>>20)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, rel := range asm {
		if err := checkIncludes(dir, rel); err != nil {
			return err
		}
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
// directory of the host), or no directory of it at all. go.mod is read as
// the go command reads it (go mod edit -json), never by hand: a target
// written "./x//../../classmate" once passed a reader that took the // for
// a comment. A local target must, cleaned and with its symlinks resolved,
// be inside the submission. Module-path targets (example.com/x v1.2.3)
// come from the module cache, offline, and are fine.
func checkReplaces(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("%w: go.mod: %v", ErrSource, errors.Unwrap(err))
	}
	mod, err := readGoMod(dir)
	if err != nil {
		return err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for _, r := range mod.Replace {
		target := r.New.Path
		if r.New.Version != "" || !localPath(target) {
			continue
		}
		where := "go.mod" + lineOf(raw, target)
		outside := fmt.Errorf("%w: %s replaces a module with %s, a directory outside your submission; the grader builds only the files you submitted: put the code inside your module",
			ErrSource, where, cleanLine(target))
		if filepath.IsAbs(target) {
			return outside
		}
		abs := filepath.Join(dir, target) // cleaned
		if !within(dir, abs) {
			return outside
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return fmt.Errorf("%w: %s replaces a module with %s, which is not a directory of your submission", ErrSource, where, cleanLine(target))
		}
		if !within(root, real) {
			return outside
		}
	}
	return nil
}

// goMod is what checkReplaces reads of `go mod edit -json`.
type goMod struct {
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

// readGoMod parses dir/go.mod with the go command, offline and with no
// toolchain switch; a go.mod it cannot parse is the submission's problem.
func readGoMod(dir string) (goMod, error) {
	var m goMod
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=", "GOPROXY=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.ReplaceAll(strings.TrimSpace(stderr.String()), dir+string(filepath.Separator), "")
		return m, fmt.Errorf("%w: go.mod cannot be read (go mod edit: %v: %s)", ErrSource, err, cleanLine(msg))
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("go mod edit -json: %w", err)
	}
	return m, nil
}

// within: path is dir or below it (both clean).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// lineOf is ":N" for the first line of go.mod holding s, "" when none does.
func lineOf(gomod []byte, s string) string {
	for n, line := range strings.Split(string(gomod), "\n") {
		if strings.Contains(line, s) {
			return fmt.Sprintf(":%d", n+1)
		}
	}
	return ""
}

// localPath reports a replace target that is a file path, as cmd/go reads
// it: absolute, or starting with ./ or ../ (or . and .. themselves).
func localPath(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
}
