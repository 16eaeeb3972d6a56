package autograder

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"snacklab/internal/grade"
)

// GitHub Classroom grades in the student's own repository: a workflow that
// runs one autograding command per lab step (its points the step's) and
// reports them, and the legacy autograding.json of education/autograding.

// ClassroomWorkflow and ClassroomConfig are the files Classroom reads,
// relative to the repository's root.
const (
	ClassroomWorkflow = ".github/workflows/classroom.yml"
	ClassroomConfig   = ".github/classroom/autograding.json"
)

// classroomStep is one graded step of a Classroom assignment.
type classroomStep struct {
	Num    int
	Title  string
	Points float64
}

// id is the step's workflow step id (STEP1_RESULTS is its reporter env).
func (s classroomStep) id() string { return "step" + strconv.Itoa(s.Num) }

// name is its test name in Classroom's report.
func (s classroomStep) name() string { return fmt.Sprintf("Step %d: %s", s.Num, s.Title) }

// command runs the step as the judge (root, through sudo) with the
// programs as another uid (the judged), its JUnit beside the others.
func (s classroomStep) command() string {
	return fmt.Sprintf("sudo /tmp/snacklab/lab run --bin /tmp/snacklab/sub --judged-uid %d --junit /tmp/snacklab/junit/step%d.xml %d",
		classroomJudgedUID, s.Num, s.Num)
}

// classroomJudgedUID is the judged programs' first uid on the runner.
const classroomJudgedUID = 200000

// classroomSteps are the steps graded and their points (o.Points, or
// every step with the default points).
func classroomSteps(o Options) ([]classroomStep, error) {
	points := grade.DefaultPoints()
	if o.Points != "" {
		p, _, err := grade.ParseScheme(o.Points)
		if err != nil {
			return nil, usagef("%v", err)
		}
		points = p
	}
	var out []classroomStep
	for _, s := range points.Steps() {
		out = append(out, classroomStep{Num: s.Num, Title: s.Title, Points: points[s.Num]})
	}
	return out, nil
}

// yamlString quotes s for YAML as a JSON string (YAML's double-quoted
// scalars are a superset of JSON's).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// classroomYAML is the workflow: the lab built from the repository's own
// cmd/lab (the starter carries it), the submission's programs copied where
// the judged uids can run them, one command-grader step per lab step, the
// JUnit files uploaded as an artifact, and the reporter.
func classroomYAML(steps []classroomStep) string {
	var b strings.Builder
	b.WriteString(`# Written by lab autograder classroom (snacklab, docs/grading.md).
name: Autograding Tests
on: [push, workflow_dispatch, repository_dispatch]
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
      - name: Checkout code
        uses: actions/checkout@v4
      - name: Set up Go
        uses: actions/setup-go@v5
        with:
          go-version-file: go.mod
      - name: Build the lab and the submission
        run: |
          mkdir -p /tmp/snacklab/sub /tmp/snacklab/junit
          CGO_ENABLED=0 go build -tags nomutants -o /tmp/snacklab/lab ./cmd/lab
          CGO_ENABLED=0 go build -trimpath -o /tmp/snacklab/sub/ ./cmd/queuectl ./cmd/sender ./cmd/receiver
          chmod -R a+rX /tmp/snacklab
`)
	for _, s := range steps {
		fmt.Fprintf(&b, `      - name: %s
        id: %s
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: %s
          command: %s
          timeout: 10
          max-score: %s
`, yamlString(s.name()), s.id(), yamlString(s.name()), yamlString(s.command()), strconv.FormatFloat(s.Points, 'f', -1, 64))
	}
	b.WriteString(`      - name: Upload the lab's JUnit
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: snacklab-junit
          path: /tmp/snacklab/junit/
      - name: Autograding Reporter
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
`)
	var ids []string
	for _, s := range steps {
		fmt.Fprintf(&b, "          %s_RESULTS: \"${{steps.%s.outputs.result}}\"\n", strings.ToUpper(s.id()), s.id())
		ids = append(ids, s.id())
	}
	fmt.Fprintf(&b, "        with:\n          runners: %s\n", strings.Join(ids, ","))
	return b.String()
}

// classroomTest is a test of autograding.json (education/autograding).
type classroomTest struct {
	Name       string  `json:"name"`
	Setup      string  `json:"setup"`
	Run        string  `json:"run"`
	Input      string  `json:"input"`
	Output     string  `json:"output"`
	Comparison string  `json:"comparison"`
	Timeout    int     `json:"timeout"`
	Points     float64 `json:"points"`
}

// classroomSetup builds the lab and the submission for autograding.json's
// first test (its later tests reuse them).
const classroomSetup = "mkdir -p /tmp/snacklab/sub /tmp/snacklab/junit && CGO_ENABLED=0 go build -tags nomutants -o /tmp/snacklab/lab ./cmd/lab && CGO_ENABLED=0 go build -trimpath -o /tmp/snacklab/sub/ ./cmd/queuectl ./cmd/sender ./cmd/receiver && chmod -R a+rX /tmp/snacklab"

func classroomJSON(steps []classroomStep) ([]byte, error) {
	var tests []classroomTest
	for i, s := range steps {
		t := classroomTest{Name: s.name(), Run: s.command(), Comparison: "included", Timeout: 10, Points: s.Points}
		if i == 0 {
			t.Setup = classroomSetup
		}
		tests = append(tests, t)
	}
	b, err := json.MarshalIndent(struct {
		Tests []classroomTest `json:"tests"`
	}{tests}, "", "  ")
	return append(b, '\n'), err
}

// Classroom writes the workflow and autograding config of a GitHub
// Classroom assignment into dir (missing or empty), at their paths in a
// repository: copy them into the template repository.
func Classroom(ctx context.Context, o Options, dir string) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := checkDirOut(dir); err != nil {
		return err
	}
	steps, err := classroomSteps(o)
	if err != nil {
		return err
	}
	j, err := classroomJSON(steps)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, ClassroomWorkflow), classroomYAML(steps), 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, ClassroomConfig), string(j), 0o644)
}
