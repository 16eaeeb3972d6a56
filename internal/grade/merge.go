package grade

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"snacklab/labsteps/report"
)

// Sharded grading: every output directory says which slice of which cohort
// it holds (its manifest), and Merge joins the shards of one cohort.

// manifestName is the file that says which slice of which cohort an output
// directory holds.
const manifestName = "shard.json"

// Manifest is written to every output directory (a run without --shard is
// shard 0/1) and checked by Merge.
type Manifest struct {
	Shard  int      `json:"shard"`
	Of     int      `json:"of"`
	Cohort []string `json:"cohort"` // every submission's name, sorted
	Graded []string `json:"graded"` // this shard's
	Points Points   `json:"points"` // step → points
	Runs   int      `json:"runs"`
}

func writeManifest(out string, m Manifest) error {
	return report.WriteFile(filepath.Join(out, manifestName), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	})
}

func readManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return m, fmt.Errorf("%s is not the output of lab grade: %w", dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, manifestName), err)
	}
	return m, nil
}

// MergeReport is what Merge joined.
type MergeReport struct {
	Records []Record
	Shards  int
}

// Merge joins the output directories of the shards of one cohort into out:
// it checks that they are the shards 0…n-1 of the same cohort, graded with
// the same points and runs, each exactly once, that together they graded
// every submission exactly once; then copies each submission's directory
// and rebuilds grades.csv, grades.md and grades.html from the results.json
// files.
func Merge(out string, shardDirs []string) (*MergeReport, error) {
	if len(shardDirs) == 0 {
		return nil, fmt.Errorf("no shard directories to merge")
	}
	ms, err := readShards(out, shardDirs)
	if err != nil {
		return nil, err
	}
	first := ms[0]
	owner, err := checkShards(shardDirs, ms)
	if err != nil {
		return nil, err
	}
	points := first.Points
	if len(points) == 0 {
		return nil, fmt.Errorf("%s: no points", filepath.Join(shardDirs[0], manifestName))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	names, err := copyShards(out, owner)
	if err != nil {
		return nil, err
	}
	recs, err := loadRecords(out, names)
	if err != nil {
		return nil, err
	}
	m := Manifest{Shard: 0, Of: 1, Cohort: first.Cohort, Graded: names, Points: first.Points, Runs: first.Runs}
	if err := writeManifest(out, m); err != nil {
		return nil, err
	}
	err = WriteCohort(out, recs, CohortInfo{Points: points, Runs: first.Runs, Shard: Shard{0, 1}, Cohort: len(first.Cohort), When: time.Now()})
	return &MergeReport{Records: recs, Shards: first.Of}, err
}

// readShards reads the manifest of each shard directory, refusing out as
// one of them: the merge would replace what it reads.
func readShards(out string, shardDirs []string) ([]Manifest, error) {
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	ms := make([]Manifest, len(shardDirs))
	for i, d := range shardDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		if abs == outAbs {
			return nil, fmt.Errorf("--out %s is one of the shard directories; merge into a new directory", out)
		}
		if ms[i], err = readManifest(d); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// checkShards checks that the manifests ms (of shardDirs, in that order)
// are the shards 0…n-1 of one cohort, graded alike, each once, and that
// together they graded every submission once. It returns the directory
// that graded each submission.
func checkShards(shardDirs []string, ms []Manifest) (owner map[string]string, err error) {
	first := ms[0]
	byIndex := map[int]string{}
	owner = map[string]string{}
	for i, m := range ms {
		d := shardDirs[i]
		switch {
		case m.Of != first.Of:
			return nil, fmt.Errorf("%s is shard %d/%d but %s is shard %d/%d: shards of one cohort share n", d, m.Shard, m.Of, shardDirs[0], first.Shard, first.Of)
		case !slices.Equal(m.Cohort, first.Cohort):
			return nil, fmt.Errorf("%s and %s graded different cohorts (%d and %d submissions): give every shard the same SUBMISSION list", d, shardDirs[0], len(m.Cohort), len(first.Cohort))
		case !maps.Equal(m.Points, first.Points):
			return nil, fmt.Errorf("%s used --points %s but %s used %s", d, m.Points, shardDirs[0], first.Points)
		case m.Runs != first.Runs:
			return nil, fmt.Errorf("%s ran each submission %d times but %s %d times", d, m.Runs, shardDirs[0], first.Runs)
		}
		if prev, dup := byIndex[m.Shard]; dup {
			return nil, fmt.Errorf("overlapping shards: %s and %s are both shard %d/%d", prev, d, m.Shard, m.Of)
		}
		byIndex[m.Shard] = d
		for _, n := range m.Graded {
			if prev, dup := owner[n]; dup {
				return nil, fmt.Errorf("overlapping shards: %s graded %s, and so did %s", prev, n, d)
			}
			owner[n] = d
		}
	}
	var missing []string
	for i := range first.Of {
		if _, ok := byIndex[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.Of))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing shards: %s (have %d of %d); grade them with --shard and merge again", strings.Join(missing, ", "), len(byIndex), first.Of)
	}
	var ungraded []string
	for _, n := range first.Cohort {
		if _, ok := owner[n]; !ok {
			ungraded = append(ungraded, n)
		}
	}
	if len(ungraded) > 0 {
		return nil, fmt.Errorf("%d submissions were graded by no shard (%s): a shard was interrupted; grade it again", len(ungraded), strings.Join(firstN(ungraded, 5), ", "))
	}
	return owner, nil
}

// copyShards copies each submission's directory from the shard that graded
// it (owner) into out, once its results.json reads, and returns the
// submissions' names, sorted.
func copyShards(out string, owner map[string]string) ([]string, error) {
	names := make([]string, 0, len(owner))
	for n := range owner {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := ReadResults(filepath.Join(owner[n], n, "results.json")); err != nil {
			return nil, err
		}
		if err := copyTree(filepath.Join(owner[n], n), filepath.Join(out, n)); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

// copyTree copies regular files and directories from src to dst, replacing
// dst; symlinks and special files (a submission's processes made them) are
// left out.
func copyTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			o, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(o, in); err != nil {
				o.Close()
				return err
			}
			return o.Close()
		}
		return nil
	})
}

// loadRecords reads the results.json of each named submission.
func loadRecords(out string, graded []string) ([]Record, error) {
	var recs []Record
	for _, n := range graded {
		r, err := ReadResults(filepath.Join(out, n, "results.json"))
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, nil
}
