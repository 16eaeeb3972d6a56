package labsteps

import (
	"fmt"
	"strconv"
	"strings"
)

// StepNum reads one step by its number ("8") or its name ("crash", as
// --points crash=40 accepts it); ok is false for anything else.
func StepNum(s string) (n int, ok bool) {
	all := Steps()
	if n, err := strconv.Atoi(s); err == nil {
		return n, n >= 1 && n <= len(all)
	}
	for _, st := range all {
		if strings.EqualFold(s, st.Slug) {
			return st.Num, true
		}
	}
	return 0, false
}

// selectSteps is Select: each argument is a comma-separated list of steps,
// each a number or a name, or a range of them ("3-5", "claim-redrive").
// A name with a dash (run-once) is read whole before it is read as a range.
func selectSteps(args []string) ([]Step, error) {
	all := Steps()
	if len(args) == 0 {
		return all, nil
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Slug)
	}
	want := map[int]bool{}
	for _, a := range args {
		for _, part := range strings.Split(a, ",") {
			if part == "" {
				continue
			}
			lo, hi, ok := stepRange(part)
			if !ok {
				return nil, fmt.Errorf("step %q: want a number from 1 to %d or a name (%s), a range like 3-5 or claim-redrive, or a list like 1,4",
					part, len(all), strings.Join(names, ", "))
			}
			for n := lo; n <= hi; n++ {
				want[n] = true
			}
		}
	}
	var out []Step
	for _, s := range all {
		if want[s.Num] {
			out = append(out, s)
		}
	}
	return out, nil
}

// stepRange reads "8", "crash", "3-5", "claim-run-once".
func stepRange(part string) (lo, hi int, ok bool) {
	if n, ok := StepNum(part); ok {
		return n, n, true
	}
	for i := range len(part) {
		if part[i] != '-' {
			continue
		}
		a, okA := StepNum(part[:i])
		b, okB := StepNum(part[i+1:])
		if okA && okB && a <= b {
			return a, b, true
		}
	}
	return 0, 0, false
}
