package mutants

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

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

// CrashPrograms are the programs a "# crash:" or "# powercut:" line may name: those of
// internal/crash, whose order story kills each at every crash point
// (repeated here: that package imports the lab's, not the reverse).
var CrashPrograms = []string{"enqueue", "sender", "receiver", "redrive", "finish"}
