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

const tablesUsage = `usage: lab tables --out DIR [--roster FILE] [--anonymise [--anonymise-key KEY]]

Rebuilds the cohort tables of an output directory of lab grade — grades.csv,
grades.md, grades.html, and shard.json's list of graded submissions — from the
results.json of every submission in it. Each row comes from its own
results.json only: a row changes only when that submission is regraded.

--roster FILE joins a CSV of students to the tables: a header naming the columns
submission (or dir), student_id, name, email, or no header and those four
columns in that order. It is copied to DIR/roster.csv, which later runs use.
--anonymise also writes grades-anon.{csv,md,html}: every submission under a
stable pseudonym (HMAC-SHA256 of its directory name with the key given, or with
DIR/anonymise.key, made once), with no roster, path or replay command.

flags:
`

// tableFlags adds the flags that say how tables name submissions.
func tableFlags(fs *flag.FlagSet, o *grade.TableOptions) {
	fs.StringVar(&o.Roster, "roster", "", "a CSV `file` of students: submission, student_id, name, email (copied to OUT/roster.csv)")
	fs.BoolVar(&o.Anonymise, "anonymise", false, "also write grades-anon.{csv,md,html} with stable pseudonyms for the submissions")
	fs.StringVar(&o.Key, "anonymise-key", "", "the `key` of the pseudonyms (default: OUT/anonymise.key, made once)")
}

// runTables rebuilds a grading output's tables.
func runTables(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab tables", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "the output `dir` of lab grade")
	var o grade.TableOptions
	tableFlags(fs, &o)
	rest, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, tablesUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return usageErr{fmt.Sprintf("tables: %v. Try: lab tables -h", err)}
	}
	if *out == "" || len(rest) > 0 {
		return usageErr{"tables: want --out DIR and nothing else. Try: lab tables --out grades"}
	}
	recs, err := grade.Rebuild(*out, o)
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	fmt.Fprintf(stdout, "rebuilt the tables of %d submission(s) → %s\n", len(recs), filepath.Join(*out, "grades.{csv,md,html}"))
	return nil
}
