package isolate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/isolate"
)

// claimLine is a distinctive line of the reference's claim statement in
// queue/queue.go: the mutants' search texts quote it.
const claimLine = "ORDER BY available_at, id LIMIT 1)"

// TestJudgeLabCarriesNoReferenceLine builds the containers' lab as lab
// grade does (-tags nomutants) and checks that it holds no line of the
// reference's claim SQL, which the mutants embedded in a default lab
// quote; and that isolate.New's check agrees.
func TestJudgeLabCarriesNoReferenceLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the lab: skipped with -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "queue", "queue.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), claimLine) {
		t.Fatalf("queue/queue.go: the claim line %q is gone; choose another distinctive line", claimLine)
	}
	// The control: the mutants quote it, so a lab that embeds them holds it.
	muts, _ := filepath.Glob(filepath.Join(root, "labsteps", "mutants", "*.mutant"))
	quoted := false
	for _, m := range muts {
		b, _ := os.ReadFile(m)
		quoted = quoted || strings.Contains(string(b), claimLine)
	}
	if !quoted {
		t.Fatalf("no mutant quotes %q: the check below would prove nothing", claimLine)
	}
	lab := filepath.Join(t.TempDir(), "lab")
	cmd := exec.Command("go", "build", "-tags", "nomutants", "-o", lab, "./cmd/lab")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nomutants ./cmd/lab: %v\n%s", err, out)
	}
	b, err := os.ReadFile(lab)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), claimLine) {
		t.Errorf("the judge lab holds the reference's claim line %q", claimLine)
	}
	if carries, err := isolate.CarriesMutants(lab); err != nil || carries {
		t.Errorf("CarriesMutants(judge lab): got %v, %v; want false, nil", carries, err)
	}
}
