package grade

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"snacklab/labsteps/report"
)

// TableOptions say how the cohort tables name the submissions.
type TableOptions struct {
	// Roster is a CSV file mapping a submission's directory name to a
	// student id, name and e-mail; "" uses OUT/roster.csv when present.
	// Given, it is copied there, so a later regrade joins it too.
	Roster string
	// Anonymise also writes grades-anon.{csv,md,html}: each submission
	// under a stable pseudonym, with no roster, path or replay command.
	Anonymise bool
	// Key is the anonymisation key; "" uses OUT/anonymise.key, made once.
	Key string
}

// Files grading keeps beside the tables.
const (
	// RosterName is the roster in OUT that the tables join (lab grade
	// --from-gradescope writes it).
	RosterName = "roster.csv"
	keyName    = "anonymise.key"
)

// Student is one row of a roster.
type Student struct {
	ID, Name, Email string
}

// ReadRoster reads a roster CSV: a header naming the columns (submission
// or dir, student_id or id, name, email or e-mail, in any order, any case)
// or, without one, the columns dir, student id, name, e-mail in that order.
func ReadRoster(path string) (map[string]Student, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	col := map[string]int{"dir": 0, "id": 1, "name": 2, "email": 3}
	if len(rows) > 0 {
		head := map[string]int{}
		for i, h := range rows[0] {
			switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) {
			case "submission", "dir", "directory":
				head["dir"] = i
			case "student_id", "student id", "id", "sid":
				head["id"] = i
			case "name", "student", "student name":
				head["name"] = i
			case "email", "e-mail", "mail":
				head["email"] = i
			}
		}
		if _, ok := head["dir"]; ok {
			col, rows = head, rows[1:]
		}
	}
	cell := func(row []string, k string) string {
		i, ok := col[k]
		if !ok || i >= len(row) {
			return ""
		}
		return strings.TrimSpace(row[i])
	}
	out := map[string]Student{}
	for n, row := range rows {
		d := cell(row, "dir")
		if d == "" {
			continue
		}
		if _, dup := out[d]; dup {
			return nil, fmt.Errorf("roster %s: row %d: %s listed twice", path, n+2, d)
		}
		out[d] = Student{ID: cell(row, "id"), Name: cell(row, "name"), Email: cell(row, "email")}
	}
	return out, nil
}

// Pseudonym is a submission's stable anonymous name: the first 40 bits of
// HMAC-SHA256(key, name), so the same key gives the same pseudonym in every
// regrade, and without the key nobody can tell whose it is.
func Pseudonym(key []byte, name string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(name))
	return "anon-" + hex.EncodeToString(m.Sum(nil))[:10]
}

// anonKey is the key given, or OUT/anonymise.key, made the first time.
func anonKey(out, given string) ([]byte, error) {
	if given != "" {
		return []byte(given), nil
	}
	p := filepath.Join(out, keyName)
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return []byte(strings.TrimSpace(string(b))), nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	s := hex.EncodeToString(k)
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("anonymise key: %w", err)
	}
	return []byte(s), nil
}

// anonymise is a record as the anonymised tables show it: its pseudonym for
// its name everywhere, no source path, replay command or kept work dir.
func anonymise(r Record, pseudo string) Record {
	hide := func(s string) string { return strings.ReplaceAll(s, r.Name, pseudo) }
	r.Problem, r.Source, r.Bin, r.BuildOut = hide(r.Problem), "", "", hide(r.BuildOut)
	steps := make([]StepRecord, len(r.Steps))
	for i, s := range r.Steps {
		s.Reason, s.Replay, s.Kept, s.Output = hide(s.Reason), "", nil, hide(s.Output)
		steps[i] = s
	}
	r.Steps, r.Name = steps, pseudo
	return r
}

// Rebuild remakes the cohort tables of an output directory of lab grade
// (grades.csv, grades.md, grades.html; with opt.Anonymise grades-anon.*)
// and its shard.json from the results.json of every submission in it: the
// manifest's graded submissions and any other directory holding a
// results.json that lab grade wrote. Each row comes from its own
// results.json alone, so a row changes only when that submission is
// regraded.
func Rebuild(out string, opt TableOptions) ([]Record, error) {
	m, merr := readManifest(out)
	names := slices.Clone(m.Graded)
	ents, err := os.ReadDir(out)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() && !slices.Contains(names, e.Name()) {
			if _, err := os.Stat(filepath.Join(out, e.Name(), "results.json")); err == nil {
				if _, err := ReadResults(filepath.Join(out, e.Name(), "results.json")); err == nil {
					names = append(names, e.Name())
				}
			}
		}
	}
	var recs []Record
	var kept []string
	for _, n := range names {
		r, err := ReadResults(filepath.Join(out, n, "results.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since: no row
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
		kept = append(kept, n)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	sort.Strings(kept)
	if merr != nil {
		m = Manifest{Shard: 0, Of: 1, Runs: 1}
	}
	if len(m.Points) == 0 {
		m.Points = pointsOf(recs)
	}
	m.Graded = kept
	for _, n := range kept {
		if !slices.Contains(m.Cohort, n) {
			m.Cohort = append(m.Cohort, n)
		}
	}
	sort.Strings(m.Cohort)
	if err := writeManifest(out, m); err != nil {
		return nil, err
	}
	info := CohortInfo{Points: m.Points, Runs: max(m.Runs, 1), Shard: Shard{m.Shard, max(m.Of, 1)}, Cohort: len(m.Cohort), When: time.Now()}
	return recs, writeTables(out, recs, info, opt)
}

// pointsOf is the points of the steps the records were graded on.
func pointsOf(recs []Record) Points {
	p := Points{}
	for _, r := range recs {
		for _, s := range r.Steps {
			p[s.Num] = max(p[s.Num], s.Points)
		}
	}
	return p
}

// writeTables writes the tables with the roster joined, and the
// anonymised ones when asked.
func writeTables(out string, recs []Record, info CohortInfo, opt TableOptions) error {
	rosterPath := filepath.Join(out, RosterName)
	if opt.Roster != "" {
		if _, err := ReadRoster(opt.Roster); err != nil {
			return err
		}
		b, err := os.ReadFile(opt.Roster)
		if err != nil {
			return err
		}
		if abs, _ := filepath.Abs(opt.Roster); abs != rosterPath {
			if err := report.WriteFile(rosterPath, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
				return err
			}
		}
	}
	if _, err := os.Stat(rosterPath); err == nil {
		r, err := ReadRoster(rosterPath)
		if err != nil {
			return err
		}
		info.Roster = r
	}
	if err := WriteCohort(out, recs, info); err != nil {
		return err
	}
	if !opt.Anonymise {
		return nil
	}
	key, err := anonKey(out, opt.Key)
	if err != nil {
		return err
	}
	anon := make([]Record, len(recs))
	for i, r := range recs {
		anon[i] = anonymise(r, Pseudonym(key, r.Name))
	}
	sort.Slice(anon, func(i, j int) bool { return anon[i].Name < anon[j].Name })
	info.Roster, info.Anonymous = nil, true
	t := newTable(anon, info)
	return joinErr(
		report.WriteFile(filepath.Join(out, "grades-anon.csv"), t.csv),
		report.WriteFile(filepath.Join(out, "grades-anon.md"), t.markdown),
		report.WriteFile(filepath.Join(out, "grades-anon.html"), t.html),
	)
}

// WriteRoster writes roster to path in the format ReadRoster reads: a
// header submission, student_id, name, email, then one row per submission,
// sorted, so that a roster made by a program (lab grade --from-gradescope)
// joins exactly as one a teacher wrote.
func WriteRoster(path string, roster map[string]Student) error {
	names := make([]string, 0, len(roster))
	for n := range roster {
		names = append(names, n)
	}
	slices.Sort(names)
	return report.WriteFile(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		cw.Write([]string{"submission", "student_id", "name", "email"})
		for _, n := range names {
			s := roster[n]
			cw.Write([]string{n, s.ID, s.Name, s.Email})
		}
		cw.Flush()
		return cw.Error()
	})
}
