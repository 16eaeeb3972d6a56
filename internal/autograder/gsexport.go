package autograder

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"snacklab/internal/grade"
)

// Gradescope's "Download Submissions" export: a zip (or the directory it
// unpacks to) holding submission_metadata.yml and one directory per
// submission, submission_<id>/, with the files the students submitted. The
// yml maps each directory name to the submission's :submitters: (:name:,
// :sid:, :email:), :created_at:, :score: and more, in Ruby's YAML (symbol
// keys with a leading colon).

// GradescopeMetadata is the export's file naming every submission.
const GradescopeMetadata = "submission_metadata.yml"

// Bounds of an export zip, counted in bytes actually unpacked (a zip's
// headers may lie).
const (
	maxExportFiles = 200000
	maxExportBytes = 4 << 30
)

// Errors a caller (lab grade) tells apart: the export is not one.
var (
	ErrExport       = errors.New("not a Gradescope submissions export")
	ErrExportUnsafe = errors.New("unsafe export zip")
)

// Export is a Gradescope export made ready to grade.
type Export struct {
	// Paths are the submissions' modules, one per submission: its
	// directory, or its one subdirectory holding go.mod (ModuleDir).
	Paths []string
	// Roster maps the name lab grade gives each path to its submitters;
	// a group's ids, names and e-mails are joined with "; ".
	Roster map[string]grade.Student
	// Cleanup removes what was unpacked (nothing for a directory).
	Cleanup func()
}

// ModuleDir is where a submission's module is: dir itself when it holds
// go.mod, else its one subdirectory holding go.mod (a repository uploaded
// whole), else dir (lab grade then says why it is not a submission).
// grade.sh applies the same rule in sh (GradeScript).
func ModuleDir(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*", "go.mod"))
	if len(m) == 1 {
		return filepath.Dir(m[0])
	}
	return dir
}

// ReadGradescopeExport reads a Gradescope submissions export, a zip file
// or its unpacked directory. A zip is unpacked into a temporary directory
// (Cleanup removes it), refusing entries that would land outside it, links
// and other non-regular files, and more than maxExportFiles files or
// maxExportBytes bytes. Nothing is left behind on error.
func ReadGradescopeExport(path string) (Export, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Export{}, err
	}
	if fi.IsDir() {
		e, err := readExportDir(path)
		e.Cleanup = func() {}
		return e, err
	}
	tmp, err := os.MkdirTemp("", "snacklab-gradescope-export-*")
	if err != nil {
		return Export{}, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	if err := unzipSafe(path, tmp); err != nil {
		cleanup()
		return Export{}, err
	}
	e, err := readExportDir(tmp)
	if err != nil {
		cleanup()
		return Export{}, err
	}
	e.Cleanup = cleanup
	return e, nil
}

// readExportDir reads an unpacked export: dir holds the yml, or its one
// subdirectory does (a zip wrapping the export in a folder).
func readExportDir(dir string) (Export, error) {
	if _, err := os.Stat(filepath.Join(dir, GradescopeMetadata)); err != nil {
		m, _ := filepath.Glob(filepath.Join(dir, "*", GradescopeMetadata))
		if len(m) != 1 {
			return Export{}, fmt.Errorf("%w: no %s", ErrExport, GradescopeMetadata)
		}
		dir = filepath.Dir(m[0])
	}
	b, err := os.ReadFile(filepath.Join(dir, GradescopeMetadata))
	if err != nil {
		return Export{}, err
	}
	subs, err := parseSubmissionMetadata(string(b))
	if err != nil {
		return Export{}, fmt.Errorf("%w: %s: %v", ErrExport, GradescopeMetadata, err)
	}
	if len(subs) == 0 {
		return Export{}, fmt.Errorf("%w: %s lists no submission", ErrExport, GradescopeMetadata)
	}
	var e Export
	students := map[string]grade.Student{}
	for _, s := range subs {
		d := filepath.Join(dir, s.dir)
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			return Export{}, fmt.Errorf("%w: %s lists %s, which is no directory of the export", ErrExport, GradescopeMetadata, s.dir)
		}
		p := ModuleDir(d)
		e.Paths = append(e.Paths, p)
		students[p] = s.students()
	}
	// The roster is keyed by the names lab grade gives the paths.
	e.Roster = map[string]grade.Student{}
	for _, s := range grade.Discover(e.Paths) {
		e.Roster[s.Name] = students[s.Path]
	}
	return e, nil
}

// unzipSafe unpacks the zip at path into dir.
func unzipSafe(path, dir string) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrExport, err)
	}
	defer zr.Close()
	if len(zr.File) > maxExportFiles {
		return fmt.Errorf("%w: more than %d entries", ErrExportUnsafe, maxExportFiles)
	}
	var total int64
	for _, f := range zr.File {
		name := strings.TrimSuffix(f.Name, "/")
		if !filepath.IsLocal(name) || strings.Contains(f.Name, `\`) {
			return fmt.Errorf("%w: entry %q would land outside the export's directory", ErrExportUnsafe, f.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		mode := f.Mode()
		switch {
		case mode.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			continue
		case !mode.IsRegular():
			return fmt.Errorf("%w: entry %q is not a regular file (%v)", ErrExportUnsafe, f.Name, mode.Type())
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		n, err := unzipFile(f, dst, maxExportBytes-total)
		total += n
		if err != nil {
			return err
		}
	}
	return nil
}

// unzipFile writes one entry to dst, at most left bytes of it.
func unzipFile(f *zip.File, dst string, left int64) (int64, error) {
	r, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrExport, f.Name, err)
	}
	defer r.Close()
	w, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("%w: entry %q: %v", ErrExportUnsafe, f.Name, err)
	}
	n, err := io.Copy(w, io.LimitReader(r, left+1))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("%w: %s: %v", ErrExport, f.Name, err)
	}
	if n > left {
		return n, fmt.Errorf("%w: more than %d MiB unpacked", ErrExportUnsafe, maxExportBytes>>20)
	}
	return n, nil
}

// ---- submission_metadata.yml ----

// gsSubmission is one entry of the yml.
type gsSubmission struct {
	dir        string
	submitters []grade.Student
}

// students joins a group's submitters into one roster row.
func (s gsSubmission) students() grade.Student {
	var ids, names, emails []string
	for _, st := range s.submitters {
		ids, names, emails = append(ids, st.ID), append(names, st.Name), append(emails, st.Email)
	}
	return grade.Student{ID: strings.Join(ids, "; "), Name: strings.Join(names, "; "), Email: strings.Join(emails, "; ")}
}

// parseSubmissionMetadata reads exactly the shape Gradescope writes, and
// refuses anything else with the line at fault: a top-level mapping of
// directory names, each to a block mapping of :symbol: keys, of which
// :submitters: is a block sequence of mappings with :name:, :sid: and
// :email: scalars. The other keys (:created_at:, :score:, :results:, …)
// and whatever is nested in them are skipped. Not a YAML parser: no flow
// collections, anchors, tags or multi-line scalars where it reads values.
func parseSubmissionMetadata(text string) ([]gsSubmission, error) {
	var (
		subs      []gsSubmission
		cur       *gsSubmission
		keyIndent = -1 // indent of the current submission's keys
		inSub     bool // inside :submitters:
		itemInd   = -1 // indent of the submitters' "- "
		seen      = map[string]bool{}
	)
	bad := func(n int, format string, args ...any) error {
		return fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...))
	}
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \r")
		trim := strings.TrimLeft(line, " ")
		if trim == "" || strings.HasPrefix(trim, "#") || (n == 1 && trim == "---") {
			continue
		}
		if strings.HasPrefix(line, "\t") {
			return nil, bad(n, "a tab in the indentation")
		}
		ind := len(line) - len(trim)
		if ind == 0 {
			key, val, ok := strings.Cut(trim, ":")
			if !ok || strings.TrimSpace(val) != "" || key == "" || strings.ContainsAny(key, "/\\ '\"{}[]") || !filepath.IsLocal(key) {
				return nil, bad(n, "want a submission's directory name followed by a colon, got %q", trim)
			}
			if seen[key] {
				return nil, bad(n, "%s listed twice", key)
			}
			seen[key] = true
			subs = append(subs, gsSubmission{dir: key})
			cur, keyIndent, inSub, itemInd = &subs[len(subs)-1], -1, false, -1
			continue
		}
		if cur == nil {
			return nil, bad(n, "indented line before any submission")
		}
		if keyIndent < 0 {
			keyIndent = ind
		}
		if ind < keyIndent {
			return nil, bad(n, "indentation %d under %s, whose keys are at %d", ind, cur.dir, keyIndent)
		}
		if ind == keyIndent && !strings.HasPrefix(trim, "- ") {
			key, _, err := symbolPair(trim)
			if err != nil {
				return nil, bad(n, "%v", err)
			}
			inSub = key == "submitters"
			continue
		}
		if !inSub {
			continue // nested in a key we skip
		}
		if strings.HasPrefix(trim, "- ") {
			if itemInd < 0 {
				itemInd = ind
			}
			if ind != itemInd {
				return nil, bad(n, "a submitter at indentation %d, want %d", ind, itemInd)
			}
			cur.submitters = append(cur.submitters, grade.Student{})
			trim, ind = trim[2:], ind+2
		} else if len(cur.submitters) == 0 || ind != itemInd+2 {
			return nil, bad(n, "want a submitter (- :name: …) under :submitters:, got %q", trim)
		}
		key, val, err := symbolPair(trim)
		if err != nil {
			return nil, bad(n, "%v", err)
		}
		st := &cur.submitters[len(cur.submitters)-1]
		switch key {
		case "name":
			st.Name = val
		case "sid":
			st.ID = val
		case "email":
			st.Email = val
		}
	}
	slices.SortFunc(subs, func(a, b gsSubmission) int { return strings.Compare(a.dir, b.dir) })
	return subs, nil
}

// symbolPair reads ":key: value", the value a plain, single- or
// double-quoted scalar (or nothing: a block follows).
func symbolPair(s string) (key, val string, err error) {
	if !strings.HasPrefix(s, ":") {
		return "", "", fmt.Errorf("want a :symbol: key, got %q", s)
	}
	key, rest, ok := strings.Cut(s[1:], ":")
	if !ok || key == "" || (rest != "" && rest[0] != ' ') {
		return "", "", fmt.Errorf("want a :symbol: key, got %q", s)
	}
	rest = strings.TrimSpace(rest)
	switch {
	case rest == "", rest == "~", rest == "null":
		return key, "", nil
	case strings.HasPrefix(rest, "'"):
		if len(rest) < 2 || !strings.HasSuffix(rest, "'") {
			return "", "", fmt.Errorf(":%s: an unterminated quoted value", key)
		}
		return key, strings.ReplaceAll(rest[1:len(rest)-1], "''", "'"), nil
	case strings.HasPrefix(rest, `"`):
		v, err := strconv.Unquote(rest)
		if err != nil {
			return "", "", fmt.Errorf(":%s: a double-quoted value this reader cannot read: %s", key, rest)
		}
		return key, v, nil
	case strings.ContainsAny(rest[:1], "{[&*!|>"):
		return "", "", fmt.Errorf(":%s: a value this reader does not handle (%q): not the export's shape", key, rest)
	}
	if i := strings.Index(rest, " #"); i >= 0 {
		rest = strings.TrimSpace(rest[:i])
	}
	return key, rest, nil
}
