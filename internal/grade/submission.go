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
	"snacklab/labsteps/report"
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
// is > 0. See ParseScheme for what else a points file may say.
func ParsePoints(spec string) (Points, error) {
	p, _, err := ParseScheme(spec)
	return p, err
}

// ParseScheme reads a points spec or file (see ParsePoints) with, besides
// STEP=POINTS pairs:
//   - STEP.PART=WEIGHT (6.c=2): the part's weight within its step, whose
//     points are split among its parts in proportion (1 for a part not
//     named), so the step's total stays its points;
//   - KEY=VISIBILITY, KEY a step (6), a part (6.c) or * for the whole
//     results.json, VISIBILITY one of Gradescope's visible, hidden,
//     after_due_date, after_published.
//
// A spec with no STEP=POINTS pair grades every step with DefaultPoints.
func ParseScheme(spec string) (Points, report.Scheme, error) {
	src := spec
	if !strings.Contains(spec, "=") {
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, report.Scheme{}, fmt.Errorf("--points %s: %w (want pairs like 1=10,2=10 or a file of them)", spec, err)
		}
		src = string(b)
	}
	p := Points{}
	sc := report.Scheme{Weights: map[string]float64{}, Visibility: map[string]string{}}
	total, others := 0.0, 0
	for ln, line := range strings.Split(src, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			where := fmt.Sprintf("%q", f)
			if src != spec {
				where = fmt.Sprintf("%s:%d: %q", spec, ln+1, f)
			}
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, sc, fmt.Errorf("--points %s: want KEY=VALUE", where)
			}
			if slices.Contains(report.Visibilities(), v) {
				key, err := visibilityKey(k)
				if err != nil {
					return nil, sc, fmt.Errorf("--points %s: %w", where, err)
				}
				sc.Visibility[key] = v
				others++
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, sc, fmt.Errorf("--points %s: points must be a number >= 0 (or a visibility: %s)", where, strings.Join(report.Visibilities(), ", "))
			}
			if step, part, isPart := strings.Cut(k, "."); isPart {
				n, ok := stepNum(step)
				if !ok || part == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") != "" {
					return nil, sc, fmt.Errorf("--points %s: want STEP.PART=WEIGHT, PART a letter (6.c=2)", where)
				}
				sc.Weights[report.Key(n, part)] = x
				others++
				continue
			}
			n, ok := stepNum(k)
			if !ok {
				return nil, sc, fmt.Errorf("--points %s: want STEP=POINTS with STEP 1–%d or a step's name (retry, durable, …)", where, len(labsteps.Steps()))
			}
			if _, dup := p[n]; dup {
				return nil, sc, fmt.Errorf("--points %s: step %d given twice", where, n)
			}
			p[n] = x
			total += x
		}
	}
	if len(p) == 0 && others > 0 {
		p, total = DefaultPoints(), 100
	}
	if len(p) == 0 || total <= 0 {
		return nil, sc, fmt.Errorf("--points %s: no points given; want pairs like 1=10,2=10 summing to more than 0", spec)
	}
	for k := range sc.Weights {
		n, _ := strconv.Atoi(strings.SplitN(k, ".", 2)[0])
		if _, ok := p[n]; !ok {
			return nil, sc, fmt.Errorf("--points %s: part %s of a step that is not graded", spec, k)
		}
	}
	return p, sc, nil
}

// stepNum reads a step's number or slug (or crashpoints and powercut,
// graded lab crash: crash.go).
func stepNum(k string) (int, bool) {
	switch k {
	case CrashName:
		return CrashItem(), true
	case PowerCutName:
		return PowerCutItem(), true
	}
	if n, err := strconv.Atoi(k); err == nil {
		return n, n >= 1 && n <= len(labsteps.Steps())
	}
	for _, s := range labsteps.Steps() {
		if s.Slug == k {
			return s.Num, true
		}
	}
	return 0, false
}

// visibilityKey reads what a visibility applies to: * or all (the whole
// submission), a step (6 or run-once) or a part (6.c).
func visibilityKey(k string) (string, error) {
	if k == "*" || k == "all" {
		return "", nil
	}
	step, part, isPart := strings.Cut(k, ".")
	n, ok := stepNum(step)
	if !ok || (isPart && (part == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") != "")) {
		return "", fmt.Errorf("a visibility is for * (everything), a step (6) or a part (6.c), not %q", k)
	}
	return report.Key(n, part), nil
}

// ParseVisibility reads --visibility: one of Gradescope's values for the
// whole submission (hidden), or KEY=VALUE pairs as in a points file
// (*=after_due_date,6.n=hidden), into s's visibilities.
func ParseVisibility(spec string, s *report.Scheme) error {
	if s.Visibility == nil {
		s.Visibility = map[string]string{}
	}
	if slices.Contains(report.Visibilities(), spec) {
		s.Visibility[""] = spec
		return nil
	}
	for _, f := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || !slices.Contains(report.Visibilities(), v) {
			return fmt.Errorf("--visibility %q: want one of %s, or KEY=VALUE pairs (*=hidden,6.c=after_due_date)", f, strings.Join(report.Visibilities(), ", "))
		}
		key, err := visibilityKey(k)
		if err != nil {
			return fmt.Errorf("--visibility %q: %w", f, err)
		}
		s.Visibility[key] = v
	}
	return nil
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
	if x := p.CrashPoints(); x > 0 {
		parts = append(parts, CrashName+"="+num(x))
	}
	if x := p.PowerCutPoints(); x > 0 {
		parts = append(parts, PowerCutName+"="+num(x))
	}
	return strings.Join(parts, ",")
}

// num prints points without trailing zeros: 12.5, 10, 8.333.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}
