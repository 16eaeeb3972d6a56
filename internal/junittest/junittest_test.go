package junittest_test

import (
	"testing"

	"snacklab/internal/junittest"
)

// The schema has teeth: the two faults the Jenkins plugin rejects, and a
// few more, fail validation; a minimal good file passes.
func TestValidateRejects(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	good := head + `<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="0.210"><testcase name="c" classname="k" time="1.000"></testcase></testsuite></testsuites>`
	junittest.Validate(t, "good", []byte(good))
	for _, tc := range []struct{ name, doc string }{
		{"suite without errors", `<testsuites><testsuite name="s" tests="1" failures="0"><testcase name="c"/></testsuite></testsuites>`},
		{"properties inside a testcase", `<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="c"><properties><property name="p" value="1"/></properties></testcase></testsuite></testsuites>`},
		{"testcase without name", `<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase/></testsuite></testsuites>`},
		{"time with a unit", `<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="1s"/></testsuites>`},
		{"property without value", `<testsuites><testsuite name="s" tests="0" failures="0" errors="0"><properties><property name="p"/></properties></testsuite></testsuites>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeT{TB: t}
			junittest.Validate(ft, tc.name, []byte(head+tc.doc))
			if !ft.failed {
				t.Errorf("%s: expected the schema to reject it, observed it accepted:\n%s", tc.name, tc.doc)
			}
		})
	}
}

// fakeT records Errorf instead of failing the real test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
