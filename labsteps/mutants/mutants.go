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
	"errors"
	"io/fs"
	"slices"
	"sort"
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
