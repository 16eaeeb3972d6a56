package grade

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// NotGradedSources lists the submissions a cohort's output dir out records
// as not graded (some part not judged: the grader's trouble), by the path
// each was graded from, in name order: what `lab grade --not-graded` grades
// again, alone, into out, where only their rows change.
func NotGradedSources(out string) ([]string, error) {
	ents, err := os.ReadDir(out)
	if err != nil {
		return nil, fmt.Errorf("read the cohort's results: %w", err)
	}
	var names, srcs []string
	bySrc := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(out, e.Name(), "results.json")
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		r, err := ReadResults(p)
		if err != nil {
			return nil, err
		}
		if r.NotGraded == "" {
			continue
		}
		if r.Source == "" {
			return nil, fmt.Errorf("%s: not graded, but no source path recorded to grade again", p)
		}
		names = append(names, r.Name)
		bySrc[r.Name] = r.Source
	}
	sort.Strings(names)
	for _, n := range names {
		srcs = append(srcs, bySrc[n])
	}
	return srcs, nil
}
