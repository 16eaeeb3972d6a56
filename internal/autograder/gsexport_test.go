package autograder_test

import (
	"archive/zip"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"snacklab/internal/autograder"
	"snacklab/internal/grade"
)

// sampleMetadata is submission_metadata.yml as Gradescope writes it (Ruby
// symbol keys): one submission by one student, one by a pair, with the
// keys the reader skips, nested ones too.
const sampleMetadata = `---
submission_1001:
  :submitters:
  - :name: Ann Lee
    :sid: '100'
    :email: ann@example.edu
  :created_at: 2026-11-30 21:14:02.000000000 -08:00
  :score: 87.5
  :results:
    :tests:
    - :name: 1.a
      :score: 5.0
submission_1002:
  :submitters:
  - :name: "Bo O'Neil"
    :sid: '200'
    :email: bo@example.edu
  - :name: 'Cy D''Arcy'
    :sid: 201
    :email: cy@example.edu
  :created_at: 2026-12-01 08:00:00.000000000 -08:00
  :score:
`

// sampleFiles is the export: submission_1001's module at its root,
// submission_1002's in a subdirectory (a repository uploaded whole).
var sampleFiles = map[string]string{
	"submission_metadata.yml":          sampleMetadata,
	"submission_1001/go.mod":           "module snacklab\n",
	"submission_1001/main.go":          "package main\n",
	"submission_1002/snacklab/go.mod":  "module snacklab\n",
	"submission_1002/snacklab/main.go": "package main\n",
	"submission_1002/README.md":        "hi\n",
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeZip(t *testing.T, path string, files map[string]string, link string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if link != "" {
		h := &zip.FileHeader{Name: link}
		h.SetMode(os.ModeSymlink | 0o777)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("/etc/passwd"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadGradescopeExport(t *testing.T) {
	wantRoster := map[string]grade.Student{
		"submission_1001": {ID: "100", Name: "Ann Lee", Email: "ann@example.edu"},
		"snacklab":        {ID: "200; 201", Name: "Bo O'Neil; Cy D'Arcy", Email: "bo@example.edu; cy@example.edu"},
	}
	for _, kind := range []string{"dir", "zip", "zip in a folder"} {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			export := filepath.Join(root, "export")
			switch kind {
			case "dir":
				writeTree(t, export, sampleFiles)
			case "zip":
				export += ".zip"
				writeZip(t, export, sampleFiles, "")
			case "zip in a folder":
				export += ".zip"
				wrapped := map[string]string{}
				for k, v := range sampleFiles {
					wrapped["assignment_7_export/"+k] = v
				}
				writeZip(t, export, wrapped, "")
			}
			e, err := autograder.ReadGradescopeExport(export)
			if err != nil {
				t.Fatal(err)
			}
			var rel []string
			for _, p := range e.Paths {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err != nil {
					t.Errorf("path %s holds no go.mod", p)
				}
				parts := strings.Split(filepath.ToSlash(p), "/")
				rel = append(rel, strings.Join(parts[len(parts)-2:], "/"))
			}
			wantRel := []string{"export/submission_1001", "submission_1002/snacklab"}
			if kind != "dir" {
				wantRel[0] = parentOf(e.Paths[0]) + "/submission_1001"
			}
			if got, want := rel, wantRel; !reflect.DeepEqual(got, want) {
				t.Errorf("paths: got %v, want %v", got, want)
			}
			if got, want := e.Roster, wantRoster; !reflect.DeepEqual(got, want) {
				t.Errorf("roster: got %v, want %v", got, want)
			}
			unpacked := e.Paths[0]
			e.Cleanup()
			_, err = os.Stat(unpacked)
			if gone := errors.Is(err, os.ErrNotExist); gone != (kind != "dir") {
				t.Errorf("after Cleanup, %s gone: got %v, want %v", unpacked, gone, kind != "dir")
			}
		})
	}
}

func parentOf(p string) string { return filepath.Base(filepath.Dir(p)) }

// The roster Read writes is the one lab tables --roster reads.
func TestWriteRosterRoundTrip(t *testing.T) {
	want := map[string]grade.Student{
		"submission_1": {ID: "1", Name: "Ann, Lee", Email: "a@x"},
		"snacklab":     {ID: "2; 3", Name: `B "Bo"; C`, Email: ""},
	}
	p := filepath.Join(t.TempDir(), "roster.csv")
	if err := grade.WriteRoster(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := grade.ReadRoster(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReadGradescopeExportRefuses(t *testing.T) {
	without := func(name string) map[string]string {
		m := map[string]string{}
		for k, v := range sampleFiles {
			if k != name {
				m[k] = v
			}
		}
		return m
	}
	with := func(name, body string) map[string]string {
		m := without("")
		m[name] = body
		return m
	}
	tests := []struct {
		name  string
		zip   bool
		files map[string]string
		link  string
		want  error
		msg   string
	}{
		{"no yml (dir)", false, without("submission_metadata.yml"), "", autograder.ErrExport, "no submission_metadata.yml"},
		{"no yml (zip)", true, without("submission_metadata.yml"), "", autograder.ErrExport, "no submission_metadata.yml"},
		{"entry escaping", true, with("../evil.go", "package x\n"), "", autograder.ErrExportUnsafe, `"../evil.go"`},
		{"absolute entry", true, with("/tmp/evil.go", "package x\n"), "", autograder.ErrExportUnsafe, `"/tmp/evil.go"`},
		{"symlink entry", true, sampleFiles, "submission_1001/passwd", autograder.ErrExportUnsafe, "not a regular file"},
		{"a list, not a map", false, with("submission_metadata.yml", "- submission_1001\n- submission_1002\n"), "", autograder.ErrExport, "line 1: want a submission's directory name"},
		{"flow map", false, with("submission_metadata.yml", "submission_1001: {:submitters: []}\n"), "", autograder.ErrExport, "line 1"},
		{"JSON keys", false, with("submission_metadata.yml", "submission_1001:\n  submitters:\n  - name: Ann\n"), "", autograder.ErrExport, `line 2: want a :symbol: key, got "submitters:"`},
		{"submitter not a map", false, with("submission_metadata.yml", "submission_1001:\n  :submitters:\n  - Ann\n"), "", autograder.ErrExport, "line 3"},
		{"unknown directory", false, with("submission_metadata.yml", "submission_9:\n  :submitters:\n  - :name: X\n"), "", autograder.ErrExport, "submission_9, which is no directory"},
		{"escaping key", false, with("submission_metadata.yml", "..:\n  :submitters:\n"), "", autograder.ErrExport, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			export := filepath.Join(root, "export")
			if tt.zip {
				export += ".zip"
				writeZip(t, export, tt.files, tt.link)
			} else {
				writeTree(t, export, tt.files)
			}
			_, err := autograder.ReadGradescopeExport(export)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v, want %v naming %q", err, tt.want, tt.msg)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left behind in TMPDIR: %v", left)
			}
			if _, err := os.Stat(filepath.Join(root, "evil.go")); err == nil {
				t.Errorf("an entry escaped the export's directory")
			}
		})
	}
}

// Two modules in subdirectories of the same name are named as lab grade
// names them (grade.Discover: -1, -2 in the order of their paths), and the
// roster follows.
func TestReadGradescopeExportSameSubdir(t *testing.T) {
	export := t.TempDir()
	writeTree(t, export, map[string]string{
		"submission_metadata.yml":      "submission_1:\n  :submitters:\n  - :name: A\n    :sid: '1'\nsubmission_2:\n  :submitters:\n  - :name: B\n    :sid: '2'\n",
		"submission_1/snacklab/go.mod": "module snacklab\n",
		"submission_2/snacklab/go.mod": "module snacklab\n",
	})
	e, err := autograder.ReadGradescopeExport(export)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range grade.Discover(e.Paths) {
		got[s.Name] = e.Roster[s.Name].ID
	}
	if want := map[string]string{"snacklab-1": "1", "snacklab-2": "2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("name → student id: got %v, want %v", got, want)
	}
}
