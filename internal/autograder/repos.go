package autograder

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoRepos: a --from-repos directory holds no repository.
var ErrNoRepos = errors.New("no repositories")

// Repos lists the cloned student repositories in dir (GitHub Classroom's
// `gh classroom clone student-repos`, or any directory of clones): every
// subdirectory whose name does not start with a dot, sorted. lab grade
// names a submission after its directory, so each repository's name is its
// student's id in every report (and the `submission` column a roster
// joins on).
func Repos(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, ErrNoRepos
	}
	return out, nil
}
