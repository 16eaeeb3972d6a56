// Package mutants keeps the lab's wrong answers: small edits of the
// reference, each a single bug that a named lab step must reject. A lab that
// passes the reference and fails every mutant has shown that its checks bite
// ("wheats and chaffs").
//
// Each NAME.mutant is a header of comment lines and then search-and-replace
// blocks against the reference as it is in this repository (solution
// markers and all):
//
//	# One sentence: what the wrong answer does.
//	# step: N
//	# clause: §2.finish.token
//	--- queue/queue.go
//	<<<<<<< SEARCH
//	lines of the reference, found exactly once in the file
//	=======
//	the lines that replace them
//	>>>>>>> REPLACE
//
// N is the step that must reject it; several steps are written
// "# step: 3, 7". A wrong answer that only a crash at the right moment
// exposes names the programs `lab crash` must catch it in instead (or as
// well): "# crash: receiver" (several: "# crash: enqueue, finish"); such a
// mutant needs no "# step:" line. One that only a power cut exposes names
// the programs `lab crash --power-cut` must catch it in: "# powercut:
// enqueue". "# clause:" names the CONTRACT.md clauses
// it breaks. A file may have several blocks and a mutant several files;
// blocks apply in order, each to the file as the blocks before it left it.
//
// Why search and replace rather than a unified diff: a diff's context lines
// and offsets break whenever the reference around them changes, while a
// search text only has to stay unique. A search text found zero times or
// more than once is an error that names the mutant, the file and the block,
// so a refactor that stops a mutant from applying says so at once
// (TestMutantsApply). Build copies the module, applies one mutant and builds
// the three executables of the contract, so the lab can be run against them
// with --bin. `lab selftest` builds and grades them all (docs/selftest.md).
//
// The mutants are embedded by embedded.go. A learner's starter copy leaves
// out that file and the mutants, whose search texts are the reference
// solution; there All returns ErrNoMutants.
package mutants

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Ext is the file extension of a mutant.
const Ext = ".mutant"

// VariantExt is the file extension of a variant: an edit of the reference
// that the contract allows (another order, another way to write a row, an
// optional part left out), which every step must pass. Mutants show that
// the checks bite; variants show that they bite only wrong answers.
const VariantExt = ".variant"

// embedded holds the NAME.mutant files; nil in a learner's copy and in a
// lab built with -tags nomutants.
var embedded fs.FS

// carries is embedded.go's mark, kept alive in the binary ("" without it).
var carries string

// CarriesMark is the text a lab binary holds when it embeds the mutants,
// built at run time so that a lab without them does not hold it either.
func CarriesMark() string {
	return strings.Join([]string{"snacklab-mutants:", "this binary carries", "the reference's lines"}, " ")
}

// Carried reports whether this lab embeds the mutants.
func Carried() bool { return carries != "" }

// ErrNoMutants means this copy of the module has no mutants: a learner's
// starter copy leaves them out.
var ErrNoMutants = errors.New("no mutants in this copy of the module (a learner's starter copy leaves them out)")

// Mutant is one wrong answer.
type Mutant struct {
	Name    string // file name without .mutant
	Comment string // the one-sentence description
	Steps   []int  // the lab steps that must each reject it, in order
	Step    int    // Steps[0]; 0 when none
	// Crash lists the programs of `lab crash` (internal/crash.Programs)
	// whose crash-point enumeration must report a violation.
	Crash []string
	// Batch, above 1, enumerates the Crash programs in batched delivery
	// (`lab crash --batch Batch`, header "# batch: N").
	Batch int
	// PowerCut lists the programs whose power-cut states (`lab crash
	// --power-cut`, small budget) must show a violation.
	PowerCut []string
	// Clauses are the CONTRACT.md clause ids the wrong answer breaks.
	Clauses []string
	Edits   []Edit
	Source  []byte // the whole .mutant file
	// Correct marks a variant (NAME.variant): a correct answer, which
	// every step must pass; its "# clause:" names the freedoms it takes.
	Correct bool
}

// Edit is what a mutant changes in one file of the module.
type Edit struct {
	Path   string // slash path relative to the module root
	Blocks []Block
}

// Block replaces the one occurrence of Search by Replace.
type Block struct {
	Search, Replace string
}

// Files lists the slash paths the mutant changes, sorted.
func (m Mutant) Files() []string {
	var out []string
	for _, e := range m.Edits {
		if !slices.Contains(out, e.Path) {
			out = append(out, e.Path)
		}
	}
	sort.Strings(out)
	return out
}

// FileName is the mutant's file in labsteps/mutants.
func (m Mutant) FileName() string {
	if m.Correct {
		return m.Name + VariantExt
	}
	return m.Name + Ext
}

// Available reports whether this copy of the module has the mutants.
func Available() bool { return embedded != nil }

// All lists the mutants, by name.
func All() ([]Mutant, error) { return load(Ext, Parse) }

// Variants lists the variants, by name.
func Variants() ([]Mutant, error) { return load(VariantExt, ParseVariant) }

// load reads the embedded files ending in ext, by name.
func load(ext string, parse func(string, []byte) (Mutant, error)) ([]Mutant, error) {
	if embedded == nil {
		return nil, ErrNoMutants
	}
	names, err := fs.Glob(embedded, "*"+ext)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Mutant
	for _, n := range names {
		b, err := fs.ReadFile(embedded, n)
		if err != nil {
			return nil, err
		}
		m, err := parse(strings.TrimSuffix(n, ext), b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// The block markers of a .mutant file.
const (
	markSearch  = "<<<<<<< SEARCH"
	markDivide  = "======="
	markReplace = ">>>>>>> REPLACE"
	markFile    = "--- "
)

// clauseID is the syntax of a CONTRACT.md clause id.
var clauseID = regexp.MustCompile(`^§[0-9]+(\.[a-z0-9-]+)+$`)

// Parse reads a mutant: its comment header, then its blocks.
func Parse(name string, src []byte) (Mutant, error) { return parse(name, src, false) }

// ParseVariant reads a variant, written as a mutant is but with a header of
// one sentence and "# clause:" only: every step must pass it, so it names
// none.
func ParseVariant(name string, src []byte) (Mutant, error) { return parse(name, src, true) }

func parse(name string, src []byte, correct bool) (Mutant, error) {
	m := Mutant{Name: name, Source: src, Correct: correct}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("mutant %s: %w", name, err)
	}
	i := 0
	for ; i < len(lines); i++ {
		line, ok := strings.CutPrefix(lines[i], "#")
		if !ok {
			break
		}
		if err := m.header(strings.TrimSpace(line)); err != nil {
			return m, err
		}
	}
	if correct && (m.Comment == "" || len(m.Clauses) == 0 || len(m.Steps)+len(m.Crash)+len(m.PowerCut) > 0) {
		return m, fmt.Errorf("variant %s: want a header of \"# one sentence\" and \"# clause: ids\" only (every step must pass a variant)", name)
	}
	if !correct && (m.Comment == "" || len(m.Steps) == 0 && len(m.Crash) == 0 && len(m.PowerCut) == 0) {
		return m, fmt.Errorf("mutant %s: want a header of \"# one sentence\" and \"# step: N\" (or \"# crash: PROGRAM\", \"# powercut: PROGRAM\")", name)
	}
	if m.Batch > 0 && len(m.Crash) == 0 {
		return m, fmt.Errorf("mutant %s: \"# batch: N\" is for the programs of a \"# crash:\" line", name)
	}
	if len(m.Steps) > 0 {
		m.Step = m.Steps[0]
	}
	if err := m.body(lines[i:], i); err != nil {
		return m, err
	}
	return m, nil
}

// header reads one comment line of the header.
func (m *Mutant) header(line string) error {
	list := func(v string) []string {
		return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	}
	if v, ok := strings.CutPrefix(line, "step:"); ok {
		for _, f := range list(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("mutant %s: step %q: %v", m.Name, strings.TrimSpace(v), err)
			}
			if slices.Contains(m.Steps, n) {
				return fmt.Errorf("mutant %s: step %d named twice", m.Name, n)
			}
			m.Steps = append(m.Steps, n)
		}
		if len(m.Steps) == 0 {
			return fmt.Errorf("mutant %s: \"# step:\" names no step", m.Name)
		}
	} else if v, ok := strings.CutPrefix(line, "crash:"); ok {
		return m.programs("crash", v, &m.Crash)
	} else if v, ok := strings.CutPrefix(line, "batch:"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 2 || m.Batch != 0 {
			return fmt.Errorf("mutant %s: batch %q: want one \"# batch: N\" with N of 2 or more", m.Name, strings.TrimSpace(v))
		}
		m.Batch = n
	} else if v, ok := strings.CutPrefix(line, "powercut:"); ok {
		return m.programs("powercut", v, &m.PowerCut)
	} else if v, ok := strings.CutPrefix(line, "clause:"); ok {
		for _, f := range list(v) {
			if !clauseID.MatchString(f) {
				return fmt.Errorf("mutant %s: clause %q is not a clause id like §2.enqueue.dup", m.Name, f)
			}
			if slices.Contains(m.Clauses, f) {
				return fmt.Errorf("mutant %s: clause %s named twice", m.Name, f)
			}
			m.Clauses = append(m.Clauses, f)
		}
		if len(m.Clauses) == 0 {
			return fmt.Errorf("mutant %s: \"# clause:\" names no clause", m.Name)
		}
	} else if m.Comment == "" {
		m.Comment = line
	}
	return nil
}

// programs reads the programs of a "# crash:" or "# powercut:" line.
func (m *Mutant) programs(key, v string, into *[]string) error {
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(CrashPrograms, f) {
			return fmt.Errorf("mutant %s: %s: %q is not one of %s", m.Name, key, f, strings.Join(CrashPrograms, ", "))
		}
		if slices.Contains(*into, f) {
			return fmt.Errorf("mutant %s: %s program %s named twice", m.Name, key, f)
		}
		*into = append(*into, f)
	}
	if len(*into) == 0 {
		return fmt.Errorf("mutant %s: \"# %s:\" names no program", m.Name, key)
	}
	return nil
}

// body reads the "--- path" sections and their blocks; first is the line
// number (0-based) of lines[0] in the file, for messages.
func (m *Mutant) body(lines []string, first int) error {
	at := func(i int) string { return fmt.Sprintf("mutant %s: line %d", m.Name, first+i+1) }
	var cur *Edit
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, markFile):
			p := strings.TrimSpace(strings.TrimPrefix(line, markFile))
			if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") {
				return fmt.Errorf("%s: %q is not a clean relative path", at(i), p)
			}
			m.Edits = append(m.Edits, Edit{Path: p})
			cur = &m.Edits[len(m.Edits)-1]
		case line == markSearch:
			if cur == nil {
				return fmt.Errorf("%s: a block before any \"--- path\" line", at(i))
			}
			var b Block
			var ok bool
			if b, i, ok = readBlock(lines, i+1); !ok {
				return fmt.Errorf("%s: a block without its %q and %q lines", at(i), markDivide, markReplace)
			}
			if b.Search == "" {
				return fmt.Errorf("%s: an empty search text", at(i))
			}
			cur.Blocks = append(cur.Blocks, b)
		default:
			return fmt.Errorf("%s: %q outside a block (want \"--- path\" or %q)", at(i), line, markSearch)
		}
	}
	if len(m.Edits) == 0 {
		return fmt.Errorf("mutant %s: no \"--- path\" section: it changes nothing", m.Name)
	}
	for _, e := range m.Edits {
		if len(e.Blocks) == 0 {
			return fmt.Errorf("mutant %s: %s has no block", m.Name, e.Path)
		}
	}
	return nil
}

// readBlock reads a block's search and replace texts from lines[i:] and
// returns the index of its REPLACE line.
func readBlock(lines []string, i int) (Block, int, bool) {
	var search, replace strings.Builder
	w := &search
	for ; i < len(lines); i++ {
		switch lines[i] {
		case markDivide:
			if w == &replace {
				return Block{}, i, false
			}
			w = &replace
			continue
		case markReplace:
			return Block{Search: search.String(), Replace: replace.String()}, i, w == &replace
		}
		w.WriteString(lines[i] + "\n")
	}
	return Block{}, i, false
}

// Rewrite applies the mutant's blocks for path to content, in order.
func (m Mutant) Rewrite(path, content string) (string, error) {
	for _, e := range m.Edits {
		if e.Path != path {
			continue
		}
		for n, b := range e.Blocks {
			switch c := strings.Count(content, b.Search); c {
			case 1:
				content = strings.Replace(content, b.Search, b.Replace, 1)
			default:
				where := "not found"
				if c > 1 {
					where = fmt.Sprintf("found %d times", c)
				}
				return "", fmt.Errorf("%s no longer applies: block %d of %s: its search text is %s in the reference (update labsteps/mutants/%s): %s",
					m.Name, n+1, e.Path, where, m.FileName(), firstLine(b.Search))
			}
		}
	}
	return content, nil
}

// firstLine is the first non-blank line of s, trimmed, for messages.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return strconv.Quote(l)
		}
	}
	return `""`
}

// CrashPrograms are the programs a "# crash:" or "# powercut:" line may name: those of
// internal/crash, whose order story kills each at every crash point
// (repeated here: that package imports the lab's, not the reverse).
var CrashPrograms = []string{"enqueue", "sender", "receiver", "redrive", "finish"}

// ModuleRoot finds the directory holding go.mod, from dir upwards.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found")
		}
		dir = parent
	}
}

// Programs are the packages Build builds into the bin dir.
var Programs = []string{"./cmd/queuectl", "./cmd/sender", "./cmd/receiver"}

// Build copies the module at moduleDir into work/src, applies the mutant's
// patch there and builds static executables into work/bin, which it returns.
func (m Mutant) Build(ctx context.Context, moduleDir, work string) (string, error) {
	src, bin := filepath.Join(work, "src"), filepath.Join(work, "bin")
	if err := m.Apply(ctx, moduleDir, work); err != nil {
		return "", err
	}
	if err := BuildPrograms(ctx, src, bin); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	return bin, nil
}

// Apply copies the module at moduleDir into work/src and applies the
// mutant there.
func (m Mutant) Apply(ctx context.Context, moduleDir, work string) error {
	src := filepath.Join(work, "src")
	if err := CopyModule(moduleDir, src); err != nil {
		return fmt.Errorf("mutant %s: copy module: %w", m.Name, err)
	}
	return m.ApplyIn(src)
}

// ApplyIn applies the mutant to the module copy at src, in place.
func (m Mutant) ApplyIn(src string) error {
	for _, p := range m.Files() {
		file := filepath.Join(src, filepath.FromSlash(p))
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("mutant %s: %w", m.Name, err)
		}
		out, err := m.Rewrite(p, string(b))
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			return fmt.Errorf("mutant %s: %w", m.Name, err)
		}
	}
	return nil
}

// BuildPrograms builds the contract's three executables from the module at
// src into bin, static (CGO_ENABLED=0) like run-lab.sh, so that the
// dependencies come from the build cache that run-lab.sh (or any earlier
// build) filled. Linking is most of such a build, and -s -w (no symbol
// table, no DWARF) makes it about 40% faster; stack traces still name
// functions, files and lines. (-trimpath would not help: the dependencies
// would be compiled once more, 45 s on a 2-core machine.)
//
// progs names the packages to build, of Programs; none means all of them.
func BuildPrograms(ctx context.Context, src, bin string, progs ...string) error {
	if len(progs) == 0 {
		progs = Programs
	}
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, progs...)...)
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v: %s", err, out)
	}
	return nil
}

// CopyModule copies the Go sources and module files, skipping .git, bin,
// built executables lying around (a stray `go build` output at the root is
// 20 MB, times one copy per mutant) and anything else not needed to build.
func CopyModule(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, []byte("\x7fELF")) {
			return nil
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}
