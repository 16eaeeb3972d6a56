package grade_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"snacklab/internal/grade"
	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

// No submission's build waits on a classmate's (issue #19: a hanging first
// build held every other for the build limit). A boundary's trusted Warm
// runs once, before any submission is built; then a build that hangs until
// its classmate has built does not hang, because the classmate builds
// beside it. Without a Warm the builds also start side by side.
func TestNoBuildWaitsOnAClassmate(t *testing.T) {
	t.Parallel()
	for _, withWarm := range []bool{true, false} {
		name := map[bool]string{true: "warmed by a trusted build", false: "no warm build"}[withWarm]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			mods := map[string]string{"go.mod": "module sub\n\ngo 1.26\n"}
			for _, p := range labsteps.Programs {
				mods["cmd/"+p+"/main.go"] = "package main\n\nfunc main() {}\n"
			}
			hang, quick := filepath.Join(root, "a-hangs"), filepath.Join(root, "b-quick")
			writeFiles(t, hang, mods)
			writeFiles(t, quick, mods)

			var warms, buildsBeforeWarm atomic.Int32
			var warmed atomic.Bool
			quickBuilt := make(chan struct{})
			b := &grade.Boundary{Mode: "test boundary",
				Build: func(ctx context.Context, src, bin string, timeout time.Duration) (string, string, error) {
					if withWarm && !warmed.Load() {
						buildsBeforeWarm.Add(1)
					}
					if src == quick {
						close(quickBuilt)
						return "", "built nothing (test)", nil
					}
					select { // the hanging build ends once its classmate has built
					case <-quickBuilt:
						return "", "built nothing (test)", nil
					case <-time.After(2 * time.Minute):
						return "", "waited 2 minutes for the classmate's build", nil
					}
				},
				Run: func(context.Context, string, []labsteps.Step, time.Duration, int) ([]result.Result, error) {
					t.Error("Run called for a submission that did not build")
					return nil, nil
				},
			}
			if withWarm {
				b.Warm = func(context.Context) error {
					warms.Add(1)
					warmed.Store(true)
					return nil
				}
			}
			cfg := config(t, filepath.Join(root, "out"))
			cfg.Boundary = b
			cfg.Points = grade.Points{1: 100}
			rep, err := grade.Grade(context.Background(), cfg, []string{hang, quick})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Graded {
				if want := "the build failed: built nothing (test)"; r.Problem != want {
					t.Errorf("%s: problem %q, want %q (a build waited on its classmate's)", r.Name, r.Problem, want)
				}
			}
			if withWarm && (warms.Load() != 1 || buildsBeforeWarm.Load() != 0) {
				t.Errorf("Warm ran %d times, %d builds before it; want once, before every build", warms.Load(), buildsBeforeWarm.Load())
			}
		})
	}
}
