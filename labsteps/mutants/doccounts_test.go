package mutants_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"snacklab/labsteps/mutants"
)

// TestDocCountsMatchTheBundle keeps the numbers of bundled mutants and
// variants that README.md and docs/selftest.md write in prose what
// labsteps/mutants holds (issue #35: docs/lab.md said 113 long after there
// were more). A doc that drops the number drops its pattern here too; a doc
// that writes it elsewhere should say it in one of these forms or name the
// table instead.
func TestDocCountsMatchTheBundle(t *testing.T) {
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		re   *regexp.Regexp
		want int
	}{
		{"README.md", regexp.MustCompile(`bundled known-wrong solutions \((\d+)\)`), len(all)},
		{"README.md", regexp.MustCompile(`bundled variant \((\d+) correct answers`), len(vs)},
		{filepath.Join("docs", "selftest.md"), regexp.MustCompile(`The (\d+) mutants, by the step`), len(all)},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", c.file))
		if err != nil {
			t.Fatal(err)
		}
		m := c.re.FindAllSubmatch(b, -1)
		if len(m) == 0 {
			t.Errorf("%s: no match for %q: reword the test with the doc", c.file, c.re)
			continue
		}
		for _, sm := range m {
			if n, _ := strconv.Atoi(string(sm[1])); n != c.want {
				t.Errorf("%s says %q: the bundle has %d", c.file, sm[0], c.want)
			}
		}
	}
}
