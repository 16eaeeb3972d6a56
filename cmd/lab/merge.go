package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"snacklab/internal/grade"
)

const mergeUsage = `usage: lab merge --out DIR SHARDDIR...

Joins the output directories of ` + "`lab grade --shard i/n`" + ` runs of one cohort:
copies every submission's results into DIR and rebuilds grades.csv, grades.md
and grades.html from their results.json files. Refuses shards of different
cohorts, overlapping shards and missing shards.
`

// runMerge joins the results of shards.
func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab merge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "output `dir`")
	dirs, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, mergeUsage)
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("merge: %v. Try: lab merge --out DIR SHARDDIR...", err)}
	}
	if *out == "" || len(dirs) == 0 {
		return usageErr{"merge: want --out DIR and at least one SHARDDIR. Try: lab merge --out grades shard-0 shard-1"}
	}
	if dirs, err = grade.ExpandCohort(dirs); err != nil { // a pod's args: no shell expands shard-*
		return usageErr{"merge: " + err.Error()}
	}
	rep, err := grade.Merge(*out, dirs)
	if err != nil {
		return usageErr{"merge: " + err.Error()}
	}
	fmt.Fprintf(stdout, "merged %d shard(s): %d submission(s) → %s\n", rep.Shards, len(rep.Records), filepath.Join(*out, "grades.{csv,md,html}"))
	return nil
}
