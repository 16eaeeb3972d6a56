package autograder

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PrairieLearn's external grader: an image whose entry point reads the
// student's files in /grade/student and writes /grade/results/results.json
// (gradable, score 0–1, tests with points, max_points, message, output).

// GradeRootEnv overrides /grade in the PrairieLearn entry point, so that a
// test (or a teacher) can run it against a directory laid out like it.
const GradeRootEnv = "SNACKLAB_GRADE_ROOT"

// PLResultsCommand is `lab autograder pl-results LAB_JSON PL_JSON`: the
// entry point's conversion of lab grade's results.json.
const PLResultsCommand = "pl-results"

// PLEntry is the entry point's name in the image context (and at
// /snacklab/ in the image).
const PLEntry = "prairielearn.sh"

const plEntry = `#!/bin/sh
# Written by lab autograder prairielearn (snacklab, docs/grading.md).
# PrairieLearn runs it as root in the grader image: it grades /grade/student
# with lab grade --isolate pod (the lab as root, the judge; the submission's
# programs as other uids, the judged) and writes /grade/results/results.json.
# SNACKLAB_GRADE_ROOT overrides /grade.
root=${SNACKLAB_GRADE_ROOT:-/grade}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$root/results"
rm -f "$root/results/results.json"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/snacklab-pl-XXXXXX") || exit 1
"$here/grade.sh" "$root/student" "$tmp/results.json"
"$here/bin/lab" autograder pl-results "$tmp/results.json" "$root/results/results.json"
code=$?
rm -rf "$tmp"
exit $code
`

// plDockerfile builds the grader image. The base is a Go image of the
// version the lab was built with (it has /bin/sh and the toolchain the
// submissions build with); a package made with --goroot carries its own go/.
const plDockerfile = `# Written by lab autograder prairielearn (snacklab, docs/grading.md).
# docker build -t snacklab-grader .   (BASE: any image with /bin/sh and Go {{GOVERSION}},
# or any image with /bin/sh when the package carries go/)
ARG BASE=golang:{{GOTAG}}
FROM ${BASE}
COPY . /snacklab
RUN chmod 0755 /snacklab /snacklab/bin && chmod 0555 /snacklab/bin/lab && /snacklab/` + WarmScript + `
ENTRYPOINT ["/snacklab/` + PLEntry + `"]
`

// plInfo is the part of a question's info.json that names the grader.
const plInfo = `{
  "gradingMethod": "External",
  "externalGradingOptions": {
    "enabled": true,
    "image": "snacklab-grader",
    "entrypoint": "/snacklab/` + PLEntry + `",
    "timeout": 600
  }
}
`

// PrairieLearn writes the external grader's image context into dir (which
// must be missing or empty): the Dockerfile, the entry point, the grade
// script, the lab, the module cache, and info-external.json, the lines a
// question's info.json needs.
func PrairieLearn(ctx context.Context, o Options, dir string) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := checkDirOut(dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".prairielearn-*")
	if err != nil {
		return fmt.Errorf("autograder: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := stageFiles(ctx, o, tmp); err != nil {
		return err
	}
	if err := writeCommon(ctx, o, tmp); err != nil {
		return err
	}
	goVersion, err := goEnv(ctx, o.Module, "GOVERSION")
	if err != nil {
		return err
	}
	docker := strings.NewReplacer("{{GOVERSION}}", goVersion, "{{GOTAG}}", strings.TrimPrefix(goVersion, "go")).Replace(plDockerfile)
	for _, f := range []struct {
		name, body string
		mode       os.FileMode
	}{{"Dockerfile", docker, 0o644}, {PLEntry, plEntry, 0o755}, {"info-external.json", plInfo, 0o644}} {
		if err := writeFile(filepath.Join(tmp, f.name), f.body, f.mode); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	os.Remove(dir) // missing or empty: checked above
	return os.Rename(tmp, dir)
}

// PLResult is PrairieLearn's results.json of an external grader.
type PLResult struct {
	Gradable bool     `json:"gradable"`
	Score    *float64 `json:"score,omitempty"` // 0–1; absent when not gradable
	Message  string   `json:"message"`
	Output   string   `json:"output,omitempty"`
	Tests    []PLTest `json:"tests,omitempty"`
}

// PLTest is one test of PLResult: a part of a step, or a whole step.
type PLTest struct {
	Name      string  `json:"name"`
	Points    float64 `json:"points"`
	MaxPoints float64 `json:"max_points"`
	Message   string  `json:"message"`
	Output    string  `json:"output"`
}

// labResults is what ToPrairieLearn reads of the lab's results.json
// (report.Gradescope as written: no score anywhere when not graded).
type labResults struct {
	Score  *float64 `json:"score"`
	Output string   `json:"output"`
	Tests  []struct {
		Name     string  `json:"name"`
		Score    float64 `json:"score"`
		MaxScore float64 `json:"max_score"`
		Status   string  `json:"status"`
		Output   string  `json:"output"`
	} `json:"tests"`
	Extra struct {
		NotGraded string `json:"not_graded"`
	} `json:"extra_data"`
}

// ToPrairieLearn converts the lab's results.json (b) to PrairieLearn's:
// a submission not graded (no score, or extra_data.not_graded) is not
// gradable, with the reason as the message, never a score of 0; otherwise
// the score is the lab's over the tests' maximum, each test its part.
func ToPrairieLearn(b []byte) (PLResult, error) {
	var in labResults
	if err := json.Unmarshal(b, &in); err != nil {
		return PLResult{}, fmt.Errorf("the lab's results.json: %w", err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(in.Output), "\n")
	if in.Score == nil || in.Extra.NotGraded != "" {
		msg := in.Extra.NotGraded
		if msg == "" {
			msg = first
		}
		return PLResult{Gradable: false, Message: "Not graded: " + msg, Output: in.Output}, nil
	}
	out := PLResult{Gradable: true, Message: first, Output: in.Output}
	total := 0.0
	for _, t := range in.Tests {
		total += t.MaxScore
		out.Tests = append(out.Tests, PLTest{Name: t.Name, Points: t.Score, MaxPoints: t.MaxScore, Message: t.Status, Output: t.Output})
	}
	score := 0.0
	if total > 0 {
		score = min(max(*in.Score/total, 0), 1)
	}
	out.Score = &score
	return out, nil
}

// ConvertPrairieLearn is ToPrairieLearn from file to file. A lab
// results.json that is missing or unreadable gives a result that is not
// gradable (the grader's failure), written all the same.
func ConvertPrairieLearn(labJSON, plJSON string) error {
	res := PLResult{Gradable: false, Message: NotGradedText}
	b, err := os.ReadFile(labJSON)
	if err == nil {
		if r, cerr := ToPrairieLearn(b); cerr == nil {
			res = r
		} else {
			res.Output = cerr.Error()
		}
	}
	j, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(plJSON, append(j, '\n'), 0o644)
}
