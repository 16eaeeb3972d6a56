package grade_test

import (
	"testing"

	"snacklab/internal/grade"
)

func TestParsePointsCrash(t *testing.T) {
	p, err := grade.ParsePoints("1=10,crashpoints=40")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.CrashPoints(), 40.0; got != want {
		t.Errorf("CrashPoints() = %v, want %v", got, want)
	}
	if got, want := p.Max(), 50.0; got != want {
		t.Errorf("Max() = %v, want %v", got, want)
	}
	if p, _ := grade.ParsePoints("1=10"); p.CrashPoints() != 0 {
		t.Errorf("crash verification is graded without being asked for")
	}
	if _, err := grade.ParsePoints("9=10"); err == nil {
		t.Errorf("ParsePoints(9=10) accepted a step 9")
	}
}
