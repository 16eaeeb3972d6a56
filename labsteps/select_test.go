package labsteps_test

import (
	"fmt"
	"strings"
	"testing"

	"snacklab/labsteps"
)

// Steps are selected by number or by name, alone, in ranges and lists,
// as --points accepts them (crash=40).
func TestSelectByName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // step numbers, or "error"
	}{
		{[]string{"crash"}, "8"},
		{[]string{"CRASH"}, "8"},
		{[]string{"run-once"}, "6"},
		{[]string{"claim-redrive"}, "3 4 5"},
		{[]string{"3-crash"}, "3 4 5 6 7 8"},
		{[]string{"finish-run-once"}, "4 5 6"},
		{[]string{"run-once-race"}, "6 7"},
		{[]string{"retry,crash"}, "1 8"},
		{[]string{"race", "2"}, "2 7"},
		{[]string{"crash-retry"}, "error"},
		{[]string{"crsh"}, "error"},
		{[]string{"run"}, "error"},
	} {
		steps, err := labsteps.Select(tc.args)
		got := "error"
		if err == nil {
			var nums []string
			for _, s := range steps {
				nums = append(nums, fmt.Sprint(s.Num))
			}
			got = strings.Join(nums, " ")
		} else if !strings.Contains(err.Error(), "retry, durable, claim, finish, redrive, run-once, race, crash") {
			t.Errorf("Select(%q): the error should list the step names: %v", tc.args, err)
		}
		if got != tc.want {
			t.Errorf("Select(%q) = %s, want %s (err %v)", tc.args, got, tc.want, err)
		}
	}
}
