package grade

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/scanner"
	"unicode"
)

// checkIncludes follows the #include lines of the assembler file rel (a
// path relative to the submission root) the way cmd/asm resolves them, to
// any depth and through files of any name, and refuses an include that does
// not resolve to a regular file of the submission or to one of the Go
// toolchain's own headers. The assembler reads whatever it includes: a host
// file (its first token lands in the error the student sees), a FIFO or
// /dev/zero (the build hangs to its timeout), or a file of the build's work
// directory (importcfg names the grader's paths).
//
// cmd/asm runs with the package directory as its working directory and
// looks a name up there, then in the including .s file's directory (the
// same one), then in the -I directories the go command passes: the build's
// work directory and $GOROOT/pkg/include. A nested include is resolved the
// same way, from the package directory, not from the header's own
// directory. The check mirrors that: every name is walked from the .s
// file's directory, one component at a time with Lstat, so a symbolic
// link, a ".." above the submission root or a file that is not regular is
// refused before anything is opened. This check is an early, friendly
// refusal; the build's own separation does not depend on it.
func checkIncludes(root, rel string) error {
	pkg := path.Dir(filepath.ToSlash(rel))
	c := includeChecker{root: root, pkg: pkg, done: map[string]bool{}, open: map[string]bool{}}
	return c.follow(filepath.ToSlash(rel), "")
}

// includeChecker walks the includes of one .s file.
type includeChecker struct {
	root string          // the submission
	pkg  string          // the .s file's directory, slash-separated, relative to root
	done map[string]bool // files already checked (a header included twice)
	open map[string]bool // files on the current include chain (a cycle)
}

// follow checks file (slash-separated, relative to root) and, depth first,
// every submission file it includes. via says how file was reached, for the
// error.
func (c *includeChecker) follow(file, via string) error {
	if c.done[file] {
		return nil
	}
	c.open[file] = true
	defer delete(c.open, file)
	src, err := readSourceFile(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return fmt.Errorf("%w: %s%s: %v", ErrSource, file, via, err)
	}
	for _, inc := range asmIncludes(src) {
		refuse := func(why string) error {
			return fmt.Errorf("%w: %s:%d%s includes %s, %s", ErrSource, file, inc.line, via, cleanLine(inc.name), why)
		}
		if !inc.quoted {
			return refuse(`which is not a file name in double quotes; write #include "name.h"`)
		}
		name, err := strconv.Unquote(inc.name)
		if err != nil {
			return refuse("which is not a valid quoted string")
		}
		inc.name = name
		target, why := c.resolve(name)
		switch {
		case why != "":
			return refuse(why)
		case target == "": // a toolchain header
			continue
		case c.open[target]:
			return refuse("which includes " + file + " again (an include cycle); include each header once")
		}
		if err := c.follow(target, fmt.Sprintf(" (included from %s:%d%s)", file, inc.line, via)); err != nil {
			return err
		}
	}
	c.done[file] = true
	return nil
}

// outside is the refusal of a name that does not stay in the submission.
const outside = "a file outside your submission; include only files of your module (or the toolchain's textflag.h, funcdata.h, go_asm.h)"

// resolve finds name as cmd/asm would, starting in the package directory.
// It returns the submission file it names (relative to root), or "" for a
// toolchain header, or why the include is refused.
func (c *includeChecker) resolve(name string) (target, why string) {
	if name == "" || filepath.IsAbs(name) || strings.ContainsAny(name, "\x00\\") {
		return "", outside
	}
	var cur []string
	if c.pkg != "." {
		cur = strings.Split(c.pkg, "/")
	}
	parts := strings.Split(name, "/")
	for i, part := range parts {
		switch part {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "", outside
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, part)
		fi, err := os.Lstat(filepath.Join(c.root, filepath.Join(cur...)))
		last := i == len(parts)-1
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			return c.notInTree(name)
		case err != nil:
			return "", "which cannot be read: " + cleanLine(errors.Unwrap(err).Error())
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", "a symbolic link; include a regular file of your module"
		case !last && !fi.IsDir():
			return c.notInTree(name)
		case last && !fi.Mode().IsRegular():
			return "", fmt.Sprintf("which is not a regular file (%v); include a regular file of your module", fi.Mode().Type())
		}
	}
	if len(cur) == 0 {
		return "", "which is a directory"
	}
	return path.Join(cur...), ""
}

// notInTree: the name is no file of the submission, so cmd/asm would look
// in its -I directories; only the toolchain's headers may be found there.
func (c *includeChecker) notInTree(name string) (string, string) {
	if toolchainHeaders()[name] {
		return "", ""
	}
	return "", "which is not a file of your submission (nor a header of the Go toolchain)"
}

// toolchainHeaders are the names an assembler file may include from the
// toolchain: what $GOROOT/pkg/include holds, go_asm.h (written by the go
// command into the build's work directory) and go_tls.h.
var toolchainHeaders = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{"go_asm.h": true, "go_tls.h": true, "textflag.h": true, "funcdata.h": true,
		"asm_amd64.h": true, "asm_ppc64x.h": true, "asm_riscv64.h": true, "asm_arm64.h": true}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return m
	}
	ents, err := os.ReadDir(filepath.Join(strings.TrimSpace(string(out)), "pkg", "include"))
	if err != nil {
		return m
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			m[e.Name()] = true
		}
	}
	return m
})

// readSourceFile reads a file of the submission without following a link
// and without blocking on a FIFO planted in place of a checked file, and
// refuses a file that is not regular or is past maxSourceBytes.
func readSourceFile(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSourceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSourceBytes {
		return nil, fmt.Errorf("more than %d MiB", maxSourceBytes>>20)
	}
	return b, nil
}

// asmInclude is one include found in an assembler file: name is the token
// after `include`, still quoted when quoted is true.
type asmInclude struct {
	name   string
	line   int
	quoted bool
}

// asmIncludes tokenizes src as cmd/asm's lexer does (text/scanner with its
// mode and identifier runes, comments skipped) and returns every include it
// could act on. It takes more than the assembler would, on purpose: an
// `include` identifier followed by a string anywhere (a '#' may come from a
// macro), and a `# include` followed by anything else (a macro may supply
// the name; the assembler would refuse it anyway).
func asmIncludes(src []byte) []asmInclude {
	var s scanner.Scanner
	s.Init(bytes.NewReader(src))
	s.Whitespace = 1<<'\t' | 1<<'\r' | 1<<' '
	s.Mode = scanner.ScanChars | scanner.ScanFloats | scanner.ScanIdents | scanner.ScanInts | scanner.ScanStrings | scanner.ScanComments
	s.IsIdentRune = asmIdentRune
	s.Error = func(*scanner.Scanner, string) {} // the assembler reports its own syntax errors
	next := func() (rune, string, int) {
		for {
			tok := s.Scan()
			if tok != scanner.Comment {
				return tok, s.TokenText(), s.Position.Line
			}
		}
	}
	var out []asmInclude
	prev := rune(0)
	tok, text, line := next()
	for tok != scanner.EOF {
		if tok != scanner.Ident || text != "include" {
			prev = tok
			tok, text, line = next()
			continue
		}
		hash := prev == '#'
		ntok, ntext, _ := next()
		switch {
		case ntok == scanner.String:
			out = append(out, asmInclude{name: ntext, line: line, quoted: true})
		case hash:
			out = append(out, asmInclude{name: ntext, line: line})
		}
		prev, tok, text = scanner.Ident, ntok, ntext
		line = s.Position.Line
	}
	return out
}

// asmIdentRune is cmd/asm's isIdentRune.
func asmIdentRune(ch rune, i int) bool {
	if unicode.IsLetter(ch) {
		return true
	}
	switch ch {
	case '_', '\u00B7', '\u2215':
		return true
	}
	return i > 0 && unicode.IsDigit(ch)
}
