package grade_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/grade"
	"snacklab/internal/tier"
	"snacklab/labsteps/report"
)

// csvRows reads grades.csv into rows keyed by their first cell, as bytes.
func csvRows(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, _, _ := strings.Cut(l, ",")
		rows[k] = l
	}
	return rows
}

// Regrading one of three students leaves the other two rows of every
// table byte-identical and keeps them in shard.json; lab tables rebuilds
// the same tables from the results alone; a roster joins student ids, and
// --anonymise writes pseudonyms that stay the same from one rebuild to the
// next.
func TestRegradeOneKeepsTheOthers(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	notImpl := map[string]string{"queuectl": "echo not implemented >&2; exit 1"}
	ann := binDir(t, root, "ann", nil)
	bob := binDir(t, root, "bob", notImpl)
	cat := binDir(t, root, "cat", map[string]string{"queuectl": "exit 1"})
	cfg := config(t, out)
	cfg.Points = grade.Points{1: 10}
	if _, err := grade.Grade(context.Background(), cfg, []string{ann, bob, cat}); err != nil {
		t.Fatal(err)
	}
	before := csvRows(t, filepath.Join(out, "grades.csv"))
	md, _ := os.ReadFile(filepath.Join(out, "grades.md"))
	if len(before) != 4 {
		t.Fatalf("grades.csv has %d rows, want a header and 3:\n%v", len(before), before)
	}
	rep, err := grade.Grade(context.Background(), cfg, []string{bob})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Graded) != 1 {
		t.Errorf("the regrade reports %d graded, want 1", len(rep.Graded))
	}
	after := csvRows(t, filepath.Join(out, "grades.csv"))
	for _, n := range []string{"submission", "ann", "cat"} {
		if before[n] != after[n] || after[n] == "" {
			t.Errorf("grades.csv row %s changed on regrading bob:\n got %q\nwant %q", n, after[n], before[n])
		}
	}
	if after["bob"] == "" {
		t.Error("grades.csv lost bob's row")
	}
	md2, _ := os.ReadFile(filepath.Join(out, "grades.md"))
	for _, n := range []string{"| ann |", "| cat |"} {
		if line(md, n) != line(md2, n) || line(md2, n) == "" {
			t.Errorf("grades.md row %s changed: %q → %q", n, line(md, n), line(md2, n))
		}
	}
	var m grade.Manifest
	b, _ := os.ReadFile(filepath.Join(out, "shard.json"))
	if err := json.Unmarshal(b, &m); err != nil || strings.Join(m.Graded, " ") != "ann bob cat" {
		t.Errorf("shard.json graded = %v (%v), want ann bob cat", m.Graded, err)
	}
	html, _ := os.ReadFile(filepath.Join(out, "grades.html"))
	for _, n := range []string{"sub-ann", "sub-bob", "sub-cat"} {
		if !bytes.Contains(html, []byte(n)) {
			t.Errorf("grades.html lacks %s", n)
		}
	}

	rebuildWithRoster(t, root, out)
}

// rebuildWithRoster rebuilds out's tables as lab tables does, with a roster
// (a header in another order, cat not on it) and anonymised copies.
func rebuildWithRoster(t *testing.T, root, out string) {
	os.Remove(filepath.Join(out, "grades.csv"))
	roster := filepath.Join(root, "roster.csv")
	os.WriteFile(roster, []byte("Name,Student ID,E-mail,Submission\nAnn Lee,s001,ann@uni.example,ann\nBob Roy,s002,bob@uni.example,bob\n"), 0o644)
	if _, err := grade.Rebuild(out, grade.TableOptions{Roster: roster, Anonymise: true}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(must(os.ReadFile(filepath.Join(out, "grades.csv"))))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rows[0][:4], ","), "submission,student_id,name,email"; got != want {
		t.Errorf("grades.csv header starts %s, want %s", got, want)
	}
	if got, want := strings.Join(rows[1][:4], ","), "ann,s001,Ann Lee,ann@uni.example"; got != want {
		t.Errorf("grades.csv ann's row starts %s, want %s", got, want)
	}
	if got := strings.Join(rows[3][:4], ","); got != "cat,,," {
		t.Errorf("grades.csv cat (not on the roster) starts %s, want cat,,,", got)
	}
	anon := must(os.ReadFile(filepath.Join(out, "grades-anon.csv")))
	for _, leak := range []string{"ann", "bob", "cat", "s001", "Ann"} {
		if bytes.Contains(anon, []byte(leak)) {
			t.Errorf("grades-anon.csv shows %q:\n%s", leak, anon)
		}
	}
	if _, err := grade.Rebuild(out, grade.TableOptions{Anonymise: true}); err != nil {
		t.Fatal(err)
	}
	if again := must(os.ReadFile(filepath.Join(out, "grades-anon.csv"))); !bytes.Equal(anon, again) {
		t.Errorf("pseudonyms changed between rebuilds with the stored key:\n%s\n%s", anon, again)
	}
	if rows2 := must(os.ReadFile(filepath.Join(out, "grades.csv"))); !bytes.Contains(rows2, []byte("s002")) {
		t.Error("a rebuild without --roster dropped the stored roster")
	}
}

func line(b []byte, prefix string) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A points file weights parts and sets visibility; results.json carries
// one test per part with its points and visibility, and reads back into
// the same step total.
func TestPartsInResultsJSON(t *testing.T) {
	p, sc, err := grade.ParseScheme("6=30, 6.a=3, 6.n=hidden, *=after_due_date, 2=after_published")
	if err != nil {
		t.Fatal(err)
	}
	if p[6] != 30 || sc.Weights["6.a"] != 3 || sc.VisibilityOf(6, "n") != "hidden" || sc.VisibilityOf(6, "b") != "after_due_date" ||
		sc.VisibilityOf(2, "") != "after_published" || sc.Whole() != "after_due_date" {
		t.Errorf("ParseScheme = %v %+v", p, sc)
	}
	for _, bad := range []string{"6.A=2", "6=secret", "9.a=1", "x=hidden", "6.a=hidden,7.b=2,6=1"} {
		if _, _, err := grade.ParseScheme(bad); err == nil {
			t.Errorf("ParseScheme(%q) accepted", bad)
		}
	}
	rec := grade.Record{Name: "ann", Source: "/c/ann", Kind: grade.KindBin, Runs: 1, Score: 2, Max: 3, Steps: []grade.StepRecord{
		{Num: 6, Slug: "run-once", Title: "Run-once", Points: 3, Score: 2, Runs: 1, Parts: []grade.PartRecord{
			{ID: "a", Name: "a: one", Points: 1, Score: 1, Passes: 1, Runs: 1},
			{ID: "b", Name: "b: two", Points: 1, Score: 0, Runs: 1, Reason: "[b] x: expected 1, observed 2", Clauses: []string{"§4.ack"}},
			{ID: "c", Name: "c: three", Points: 1, Score: 1, Passes: 1, Runs: 1},
		}}}}
	var b bytes.Buffer
	if err := report.EncodeGradescope(&b, rec.Gradescope(sc)); err != nil {
		t.Fatal(err)
	}
	var g report.Gradescope
	if err := json.Unmarshal(b.Bytes(), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Tests) != 3 || g.Tests[1].Number != "6.b" || g.Tests[1].Status != "failed" || g.Tests[0].Visibility != "after_due_date" || g.Visibility != "after_due_date" {
		t.Errorf("results.json tests = %+v", g.Tests)
	}
	path := filepath.Join(t.TempDir(), "results.json")
	os.WriteFile(path, b.Bytes(), 0o644)
	back, err := grade.ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Steps) != 1 || back.Steps[0].Score != 2 || back.Steps[0].Points != 3 || len(back.Steps[0].Parts) != 3 ||
		back.Steps[0].Parts[1].Clauses[0] != "§4.ack" {
		t.Errorf("ReadResults = %+v", back.Steps)
	}
}
