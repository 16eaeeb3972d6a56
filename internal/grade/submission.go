package grade

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"snacklab/labsteps"
)

// Kind is what a submission path holds.
type Kind string

const (
	KindModule  Kind = "module"  // a copy of the Go module: built, then graded
	KindBin     Kind = "bin"     // a directory of executables honouring CONTRACT.md
	KindInvalid Kind = "invalid" // neither, or not there: scored 0 with the reason
)

// Submission is one learner's solution on disk.
type Submission struct {
	Name string // unique in the cohort, safe as a directory name
	Path string // as given, cleaned
	Kind Kind
	Err  error // why it is KindInvalid
}

// Classify says what path holds: a directory with go.mod is a module; one
// with at least one of queuectl, sender, receiver is a bin dir (a missing or
// non-executable program then fails every step, with the reason); anything
// else is invalid.
func Classify(path string) (Kind, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return KindInvalid, errors.New("does not exist")
	}
	if err != nil {
		return KindInvalid, err
	}
	if !fi.IsDir() {
		return KindInvalid, errors.New("is not a directory (want a Go module with go.mod, or a directory holding queuectl, sender and receiver)")
	}
	if fi, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && !fi.IsDir() {
		return KindModule, nil
	}
	for _, p := range labsteps.Programs {
		if _, err := os.Lstat(filepath.Join(path, p)); err == nil {
			return KindBin, nil
		}
	}
	return KindInvalid, errors.New("is neither a Go module (no go.mod) nor a bin dir (no queuectl, sender or receiver)")
}

// reserved are names of the cohort's own files in the output directory.
var reserved = map[string]bool{"grades.csv": true, "grades.md": true, "grades.html": true, manifestName: true}

// Discover classifies each path and names it after its directory's base
// name, made safe for a directory name. Names that collide get -1, -2, … in
// the order of their paths as given (so every shard, given the same list,
// computes the same names). The result is sorted by name.
func Discover(paths []string) []Submission {
	subs := make([]Submission, len(paths))
	base := map[string][]int{}
	for i, p := range paths {
		p = filepath.Clean(p)
		kind, err := Classify(p)
		subs[i] = Submission{Path: p, Kind: kind, Err: err}
		b := filepath.Base(p)
		if b == "." || b == ".." || b == string(filepath.Separator) {
			if abs, err := filepath.Abs(p); err == nil {
				b = filepath.Base(abs)
			}
		}
		b = safeName(b)
		base[b] = append(base[b], i)
	}
	used := map[string]bool{}
	for b, idx := range base {
		if len(idx) == 1 && !reserved[b] {
			subs[idx[0]].Name = b
			used[b] = true
		}
	}
	keys := make([]string, 0, len(base))
	for b := range base {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	for _, b := range keys {
		idx := base[b]
		if len(idx) == 1 && !reserved[b] {
			continue
		}
		slices.SortStableFunc(idx, func(x, y int) int { return strings.Compare(subs[x].Path, subs[y].Path) })
		k := 1
		for _, i := range idx {
			for used[b+"-"+strconv.Itoa(k)] {
				k++
			}
			subs[i].Name = b + "-" + strconv.Itoa(k)
			used[subs[i].Name] = true
			k++
		}
	}
	slices.SortFunc(subs, func(a, b Submission) int { return strings.Compare(a.Name, b.Name) })
	return subs
}

// safeName keeps letters, digits, '.', '_' and '-'; anything else becomes
// '_', and a name may not start with '.' or '-'.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" || n[0] == '.' || n[0] == '-' {
		n = "_" + n
	}
	return n
}

// ---- shards ----

// Shard is slice I (0-based) of N of a cohort.
type Shard struct{ I, N int }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.I, s.N) }

// ParseShard reads "i/n" with 0 <= i < n.
func ParseShard(v string) (Shard, error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want i/n with 0 <= i < n, like 0/4 (i is 0-based, as in a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)", v)
	}
	return Shard{i, n}, nil
}

// Take returns the shard's slice of a cohort sorted by name: the
// submissions at positions I, I+N, I+2N, … Every shard must be given the
// same list of submissions; the slices are then disjoint, cover the cohort,
// and differ in size by at most one.
func (s Shard) Take(sorted []Submission) []Submission {
	if s.N <= 1 {
		return sorted
	}
	var out []Submission
	for i := s.I; i < len(sorted); i += s.N {
		out = append(out, sorted[i])
	}
	return out
}

// ---- points ----

// Points gives each graded step its points; steps not listed are not run.
type Points map[int]float64

// DefaultPoints is every step, equal points summing to 100.
func DefaultPoints() Points {
	p := Points{}
	steps := labsteps.Steps()
	for _, s := range steps {
		p[s.Num] = 100 / float64(len(steps))
	}
	return p
}

// ParsePoints reads "1=10,2=10,8=30" (a step's number or slug, '=', its
// points), or, when spec holds no '=', the file it names: the same pairs,
// one or more per line, separated by commas or white space, '#' starting a
// comment. Only the listed steps are graded. Points are >= 0 and their sum
// is > 0.
func ParsePoints(spec string) (Points, error) {
	src := spec
	if !strings.Contains(spec, "=") {
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, fmt.Errorf("--points %s: %w (want pairs like 1=10,2=10 or a file of them)", spec, err)
		}
		src = string(b)
	}
	bySlug := map[string]int{}
	for _, s := range labsteps.Steps() {
		bySlug[s.Slug] = s.Num
	}
	p := Points{}
	total := 0.0
	for ln, line := range strings.Split(src, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			k, v, ok := strings.Cut(f, "=")
			where := fmt.Sprintf("%q", f)
			if src != spec {
				where = fmt.Sprintf("%s:%d: %q", spec, ln+1, f)
			}
			n, err := strconv.Atoi(k)
			if k == CrashName { // lab crash, graded (crash.go)
				n, err = CrashItem, nil
			}
			if err != nil {
				n, ok = bySlug[k], ok && bySlug[k] != 0
			}
			if !ok || (n < 1 || n > len(labsteps.Steps())) && !(k == CrashName && n == CrashItem) {
				return nil, fmt.Errorf("--points %s: want STEP=POINTS with STEP 1–%d or a step's name (retry, durable, …)", where, len(labsteps.Steps()))
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, fmt.Errorf("--points %s: points must be a number >= 0", where)
			}
			if _, dup := p[n]; dup {
				return nil, fmt.Errorf("--points %s: step %d given twice", where, n)
			}
			p[n] = x
			total += x
		}
	}
	if len(p) == 0 || total <= 0 {
		return nil, fmt.Errorf("--points %s: no points given; want pairs like 1=10,2=10 summing to more than 0", spec)
	}
	return p, nil
}

// Steps lists the graded steps in order.
func (p Points) Steps() []labsteps.Step {
	var out []labsteps.Step
	for _, s := range labsteps.Steps() {
		if _, ok := p[s.Num]; ok {
			out = append(out, s)
		}
	}
	return out
}

// Max is the sum of the points.
func (p Points) Max() float64 {
	t := 0.0
	for _, v := range p {
		t += v
	}
	return t
}

// String is "1=12.5,2=12.5,…" in step order.
func (p Points) String() string {
	var parts []string
	for _, s := range p.Steps() {
		parts = append(parts, fmt.Sprintf("%d=%s", s.Num, num(p[s.Num])))
	}
	return strings.Join(parts, ",")
}

// num prints points without trailing zeros: 12.5, 10, 8.333.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}
