package autograder_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"snacklab/internal/autograder"
	"snacklab/labsteps/report"
)

// module is the snacklab module these tests package.
const module = "../.."

// fakeLab stands in for the lab in a package: it records its arguments in
// $FAKE_LOG and, for lab grade, copies $FAKE_RESULTS (when set) to
// --out/NAME/results.json, NAME the submission's base name, as lab grade does.
const fakeLab = `#!/bin/sh
echo "$@" >> "$FAKE_LOG"
out= last=
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift ;;
	esac
	last=$1
	shift
done
if [ -n "${FAKE_RESULTS:-}" ]; then
	mkdir -p "$out/$(basename "$last")"
	cp "$FAKE_RESULTS" "$out/$(basename "$last")/results.json"
fi
exit 3
`

// fakeStage writes what stage would, without building: the fake lab, an
// empty module cache and not-graded.json.
func fakeStage(t *testing.T) func() {
	return autograder.SetStage(func(ctx context.Context, o autograder.Options, dir string) error {
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, autograder.ModCacheDir), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, autograder.LabPath), []byte(fakeLab), 0o755); err != nil {
			return err
		}
		var b bytes.Buffer
		if err := report.EncodeGradescope(&b, autograder.NotGradedResults()); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "not-graded.json"), b.Bytes(), 0o644)
	})
}

// unzip unpacks the zip at path into dir and returns its entries' modes.
func unzip(t *testing.T, path, dir string) map[string]os.FileMode {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	modes := map[string]os.FileMode{}
	for _, f := range zr.File {
		modes[f.Name] = f.Mode()
		to := filepath.Join(dir, filepath.FromSlash(f.Name))
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(to, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b := new(bytes.Buffer)
		b.ReadFrom(r)
		r.Close()
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b.Bytes(), f.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return modes
}

func TestGradescopeZipLayout(t *testing.T) {
	defer fakeStage(t)()
	tests := []struct {
		name, points string
		wantPoints   string // points.txt, "" for none
	}{
		{"default points", "", ""},
		{"points baked in", "1=10,2=90", "1=10,2=90"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "autograder.zip")
			if err := autograder.Gradescope(context.Background(), autograder.Options{Module: module, Points: tt.points}, out); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, "source")
			modes := unzip(t, out, root)
			for _, f := range append(slices.Clone(autograder.GradescopeFiles), autograder.GradeScript, autograder.WarmScript, autograder.LabPath) {
				m, ok := modes[f]
				if got, want := ok && m.Perm()&0o111 == 0o111, true; got != want {
					t.Errorf("%s in the zip, executable: got %v (mode %v), want %v", f, got, m, want)
				}
			}
			for _, f := range []string{"not-graded.json", "warm/go.mod", "warm/go.sum", "warm/main.go", autograder.ModCacheDir + "/"} {
				if _, ok := modes[f]; !ok {
					t.Errorf("%s: not in the zip", f)
				}
			}
			b, err := os.ReadFile(filepath.Join(root, autograder.PointsFile))
			if got, want := string(b), tt.wantPoints; got != want || (want == "") != errors.Is(err, os.ErrNotExist) {
				t.Errorf("points.txt: got %q (%v), want %q", got, err, want)
			}
			for _, f := range []string{"setup.sh", "run_autograder", autograder.GradeScript, autograder.WarmScript} {
				shell := "sh"
				if f == "setup.sh" {
					shell = "bash"
				}
				if out, err := exec.Command(shell, "-n", filepath.Join(root, f)).CombinedOutput(); err != nil {
					t.Errorf("%s -n %s: %v\n%s", shell, f, err, out)
				}
			}
			main, err := os.ReadFile(filepath.Join(root, "warm", "main.go"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(main), `_ "modernc.org/sqlite"`; !strings.Contains(got, want) {
				t.Errorf("warm/main.go: got\n%s\nwant it to import %s", got, want)
			}
		})
	}
}

func TestGradescopeRefusesBadInput(t *testing.T) {
	defer fakeStage(t)()
	notModule := t.TempDir()
	if err := os.WriteFile(filepath.Join(notModule, "go.mod"), []byte("module other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    autograder.Options
	}{
		{"bad points", autograder.Options{Module: module, Points: "1=ten"}},
		{"a points file that is missing", autograder.Options{Module: module, Points: filepath.Join(notModule, "nope")}},
		{"not the snacklab module", autograder.Options{Module: notModule}},
		{"no module", autograder.Options{Module: t.TempDir()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "autograder.zip")
			err := autograder.Gradescope(context.Background(), tt.o, out)
			if got, want := errors.Is(err, autograder.ErrUsage), true; got != want {
				t.Errorf("error %v is ErrUsage: got %v, want %v", err, got, want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: got written (%v), want nothing", out, err)
			}
		})
	}
}

// TestRunAutograderScript runs the zip's run_autograder against a
// directory laid out like /autograder, with the fake lab.
func TestRunAutograderScript(t *testing.T) {
	defer fakeStage(t)()
	zipPath := filepath.Join(t.TempDir(), "autograder.zip")
	if err := autograder.Gradescope(context.Background(), autograder.Options{Module: module}, zipPath); err != nil {
		t.Fatal(err)
	}
	graded := filepath.Join(t.TempDir(), "graded.json")
	if err := os.WriteFile(graded, []byte(`{"score": 42, "tests": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		layout     string // "root": go.mod at the submission's root; "nested": in its one subdirectory
		results    string // the fake lab's results.json, "" for none
		wantModule string // the submission dir lab grade is given, relative to /autograder
		wantScore  bool
	}{
		{"graded", "root", graded, "submission", true},
		{"a repository uploaded whole", "nested", graded, "submission/snacklab-alice", true},
		{"lab grade wrote nothing", "root", "", "submission", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			unzip(t, zipPath, filepath.Join(root, "source"))
			mod := filepath.Join(root, "submission")
			if tt.layout == "nested" {
				mod = filepath.Join(mod, "snacklab-alice")
			}
			if err := os.MkdirAll(mod, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module snacklab\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(root, "lab.log")
			cmd := exec.Command(filepath.Join(root, "source", "run_autograder"))
			cmd.Env = append(os.Environ(), autograder.RootEnv+"="+root, "FAKE_LOG="+log, "FAKE_RESULTS="+tt.results, "TMPDIR="+t.TempDir())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("run_autograder: %v\n%s", err, out)
			}
			args, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Fields(string(args))
			if got, want := fields[len(fields)-1], filepath.Join(root, tt.wantModule); got != want {
				t.Errorf("lab grade's submission: got %s, want %s", got, want)
			}
			if got, want := strings.Join(fields[:3], " "), "grade --isolate pod"; got != want || slices.Contains(fields, "--trusted") {
				t.Errorf("lab's command: got %q, want it to start %q and never --trusted", args, want)
			}
			b, err := os.ReadFile(filepath.Join(root, "results", "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res map[string]any
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			_, scored := res["score"]
			if got, want := scored, tt.wantScore; got != want {
				t.Errorf("results.json has a score: got %v, want %v\n%s", got, want, b)
			}
			if !tt.wantScore && !strings.Contains(res["output"].(string), "NOT GRADED") {
				t.Errorf("results.json output: got %q, want it to say NOT GRADED", res["output"])
			}
		})
	}
}
