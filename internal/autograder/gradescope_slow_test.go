package autograder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"snacklab/internal/autograder"
	"snacklab/internal/tier"
)

// copyModule copies the files git tracks in the module into dst.
func copyModule(t *testing.T, dst string) {
	t.Helper()
	files, err := exec.Command("git", "-C", module, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			continue // deleted in the work tree
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGradescopeAutograder builds the zip, unpacks it into a directory
// laid out like Gradescope's /autograder, runs setup.sh and then
// run_autograder as root (the local engine) on the reference, the starter
// and a forger whose queuectl rewrites results.json: the reference scores
// 100, the starter 0 (graded), and the forgery does not take
// effect.
func TestGradescopeAutograder(t *testing.T) {
	tier.Slow(t)
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("run_autograder grades as root (the judged run as other uids), on Linux")
	}
	ctx := context.Background()
	work := t.TempDir()
	// The judged must be able to reach what a forger would aim at, as in
	// Gradescope's /autograder: open the test's directories to them.
	for d := work; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The zip is made by lab autograder gradescope, as a teacher makes it
	// (and without the race detector: deflating 300 MiB under it took
	// more than ten minutes).
	zipPath := filepath.Join(work, "autograder.zip")
	t0 := time.Now()
	labBin := filepath.Join(work, "lab")
	build := exec.CommandContext(ctx, "go", "build", "-o", labBin, "./cmd/lab")
	build.Dir, build.Env = module, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lab: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, labBin, "autograder", "gradescope", "--module", module, "--out", zipPath).CombinedOutput(); err != nil {
		t.Fatalf("lab autograder gradescope: %v\n%s", err, out)
	}
	st, _ := os.Stat(zipPath)
	t.Logf("the zip: %d MiB in %v", st.Size()>>20, time.Since(t0).Round(time.Second))
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := func(root string) []string {
		return append(os.Environ(), autograder.RootEnv+"="+root, "SNACKLAB_GOROOT="+strings.TrimSpace(string(goroot)))
	}

	root := filepath.Join(work, "autograder")
	// Gradescope unpacks with unzip; so does this test where it can (the
	// race detector slows the in-process inflate of 300 MiB).
	if err := os.MkdirAll(filepath.Join(root, "source"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("unzip"); err == nil {
		if out, err := exec.Command("unzip", "-q", zipPath, "-d", filepath.Join(root, "source")).CombinedOutput(); err != nil {
			t.Fatalf("unzip: %v\n%s", err, out)
		}
	} else {
		unzip(t, zipPath, filepath.Join(root, "source"))
	}
	t0 = time.Now()
	setup := exec.Command("bash", filepath.Join(root, "source", "setup.sh"))
	setup.Dir, setup.Env = filepath.Join(root, "source"), env(root)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	t.Logf("setup.sh: %v", time.Since(t0).Round(time.Second))
	results := filepath.Join(root, "results", "results.json")

	reference := filepath.Join(work, "reference")
	copyModule(t, reference)
	starter := filepath.Join(work, "starter")
	if out, err := exec.Command(filepath.Join(root, "source", autograder.LabPath), "starter", "--module", module, "--out", starter).CombinedOutput(); err != nil {
		t.Fatalf("lab starter: %v\n%s", err, out)
	}
	forger := filepath.Join(work, "forger")
	copyModule(t, forger)
	// The forger's every queuectl writes a results.json of 1000 points and a
	// canary beside it; run_autograder's own copy comes last, so the canary
	// is what shows whether the judged could write there at all.
	canary := filepath.Join(root, "results", "forged")
	forge := fmt.Sprintf("package main\n\nimport \"os\"\n\nfunc init() {\n\tos.WriteFile(%q, []byte(`{\"score\": 1000, \"tests\": []}`), 0o666)\n\tos.WriteFile(%q, nil, 0o666)\n}\n", results, canary)
	if err := os.WriteFile(filepath.Join(forger, "cmd", "queuectl", "forge.go"), []byte(forge), 0o644); err != nil {
		t.Fatal(err)
	}

	// The starter passes no step and only parts the default weights give
	// no points (docs/grading.md): graded, 0.
	tests := []struct {
		name, sub          string
		wantMin, wantBelow float64
	}{
		{"reference", reference, 100, 100.001},
		{"starter", starter, 0, 0.001},
		{"forger", forger, 100, 100.001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := filepath.Join(root, "submission")
			os.RemoveAll(sub)
			if err := os.Rename(tt.sub, sub); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(sub, tt.sub)
			t0 := time.Now()
			run := exec.Command(filepath.Join(root, "source", "run_autograder"))
			run.Env = env(root)
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("run_autograder: %v\n%s", err, out)
			}
			t.Logf("run_autograder: %v", time.Since(t0).Round(time.Second))
			b, err := os.ReadFile(results)
			if err != nil {
				t.Fatalf("results.json: %v\n%s", err, out)
			}
			var res struct {
				Score *float64 `json:"score"`
				Extra struct {
					Mode string `json:"mode"`
				} `json:"extra_data"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if res.Score == nil || *res.Score < tt.wantMin || *res.Score >= tt.wantBelow {
				t.Errorf("score: got %v, want a score in [%v, %v)\n%.2000s\n%s", res.Score, tt.wantMin, tt.wantBelow, b, out)
			}
			if _, err := os.Stat(canary); err == nil {
				t.Errorf("%s: written by the judged", canary)
			}
			if got, want := res.Extra.Mode, "isolated in a pod"; !strings.HasPrefix(got, want) {
				t.Errorf("mode: got %q, want %q…", got, want)
			}
		})
	}
}
