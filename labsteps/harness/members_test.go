package harness_test

import (
	"slices"
	"testing"

	"snacklab/labsteps/harness"
	"snacklab/queue"
)

// TestMembersAreTheReferences: the lab's JOB and REDRIVE types, whose JSON
// names the shape checks take, have the members the reference writes. A
// member added to the contract is added in three places: CONTRACT.md, the
// reference (queue: the type, its JSON tag, and for a stored member its db
// tag, column and SQL), and the lab's type here; this test names the one
// left out.
func TestMembersAreTheReferences(t *testing.T) {
	for _, c := range []struct {
		name     string
		lab, ref any
	}{
		{"JOB", harness.Job{}, queue.Job{}},
		{"REDRIVE", harness.Redrive{}, queue.Redrive{}},
	} {
		if got, want := harness.JSONNames(c.lab), harness.JSONNames(c.ref); !slices.Equal(got, want) {
			t.Errorf("%s: the lab's members %v, the reference's %v: want the same", c.name, got, want)
		}
	}
}
