package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"snacklab/internal/autograder"
)

const autograderUsage = `usage: lab autograder gradescope   --out autograder.zip [--points SPEC] [--goroot DIR]
       lab autograder prairielearn --out DIR [--points SPEC] [--goroot DIR]
       lab autograder classroom    --out DIR [--points SPEC]

Packages the lab for the platform where a course already grades
(docs/grading.md, one section per platform). Gradescope and PrairieLearn
packages hold the lab (static, without the mutants), a Go module cache of the
reference's dependencies (grading needs no network) and a script that grades
with lab grade --isolate pod: the lab as root, the judge, and the
submission's programs as other uids, the judged; never --trusted. A part not
judged is reported not graded there, never 0.

Exit: 0 written; 2 a usage error (nothing written); 1 the packaging failed.

flags:
`

// runAutograder writes a platform's autograder package.
func runAutograder(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == autograder.PLResultsCommand {
		if len(args) != 3 {
			return usageErr{"autograder " + autograder.PLResultsCommand + ": want LAB_RESULTS_JSON PRAIRIELEARN_RESULTS_JSON"}
		}
		return autograder.ConvertPrairieLearn(args[1], args[2])
	}
	fs := flag.NewFlagSet("lab autograder", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "where to write: the zip (gradescope) or a `dir` (prairielearn, classroom); required")
	var o autograder.Options
	fs.StringVar(&o.Points, "points", "", "points per step baked in, as lab grade's --points: `1=10,2=10,…` or a file (default: all 8 steps, 12.5 each)")
	fs.StringVar(&o.GoRoot, "goroot", "", "copy this Go toolchain `dir` into the package (default: Gradescope's setup.sh fetches the version the lab was built with; PrairieLearn's image copies it from a builder stage)")
	module := fs.String("module", "", "the snacklab module `dir` (default: the module holding the current directory)")
	help := func() error {
		fmt.Fprint(stdout, autograderUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if len(args) == 0 {
		return usageErr{"autograder: which platform? gradescope, prairielearn or classroom. Try: lab autograder gradescope --out autograder.zip"}
	}
	platform := args[0]
	if platform == "-h" || platform == "--help" || platform == "help" {
		return help()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return help()
		}
		return usageErr{fmt.Sprintf("autograder: %v. Try: lab autograder -h", err)}
	}
	if fs.NArg() > 0 {
		return usageErr{fmt.Sprintf("autograder: unexpected argument %q. Try: lab autograder -h", fs.Arg(0))}
	}
	if *out == "" {
		return usageErr{"autograder: --out is required. Try: lab autograder gradescope --out autograder.zip"}
	}
	root, err := moduleRoot(*module)
	if err != nil {
		return usageErr{"autograder: " + err.Error()}
	}
	o.Module, o.Log = root, stdout
	dst, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	var write func(context.Context, autograder.Options, string) error
	switch platform {
	case "gradescope":
		write = autograder.Gradescope
	case "prairielearn":
		write = autograder.PrairieLearn
	case "classroom":
		write = autograder.Classroom
	default:
		return usageErr{fmt.Sprintf("autograder: unknown platform %q: want gradescope, prairielearn or classroom", platform)}
	}
	if err := write(ctx, o, dst); err != nil {
		if errors.Is(err, autograder.ErrUsage) {
			return usageErr{err.Error()}
		}
		return err
	}
	fmt.Fprintf(stdout, "lab autograder: wrote %s\n", *out)
	return nil
}
