package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps/result"
)

// WriteJUnit writes JUnit XML: one testcase per part of each step (per
// step when it ran none), each failure with every failed check of the part.
func WriteJUnit(w io.Writer, results []result.Result, took time.Duration) error {
	return EncodeJUnit(w, JUnitOf(results, took))
}

// JUnitOf is the suite WriteJUnit writes: each step's parts, the step's
// time and story on its first testcase.
func JUnitOf(results []result.Result, took time.Duration) JUnitSuite {
	s := JUnitSuite{Name: "snacklab-lab", Time: JUnitSeconds(took.Seconds())}
	for _, r := range results {
		cases := JUnitCases(ScoreRuns(r.Step, []result.Result{r}, 1, Scheme{}), "snacklab.lab")
		cases[0].Time, cases[0].SystemOut = JUnitSeconds(r.Took.Seconds()), r.Narrative
		s.Cases = append(s.Cases, cases...)
	}
	return s
}

// JUnitCases are the testcases of a step's parts (class is their
// classname): a failure for each part that failed or was flaky, whose
// message is the first failure's plain cause and whose text explains every
// failure; a skip for a part not run.
func JUnitCases(parts []PartScore, class string) []JUnitCase {
	var out []JUnitCase
	for _, p := range parts {
		name := JUnitCaseName(p.Step.Num, p.Step.Slug)
		if p.ID != "" {
			name += "_" + p.ID
		}
		tc := JUnitCase{Name: name, Classname: class}
		switch p.Status() {
		case "not run":
			tc.Skipped = &JUnitFailure{Message: "not run"}
		case result.NotJudgedWord:
			msg := string(p.NotJudged)
			if len(p.Failures) > 0 {
				msg += ": " + p.Failures[0].Cause()
			} else if p.Problem != "" {
				first, _, _ := strings.Cut(p.Problem, "\n")
				msg += ": " + first
			}
			tc.Error = &JUnitFailure{Message: "not judged, " + msg, Type: "LabNotJudged", Text: p.Explain()}
		case "failed", "flaky":
			typ, msg := "LabStepFailed", "failed"
			if len(p.Failures) > 0 {
				msg = p.Failures[0].Cause()
				if n := len(p.Failures) - 1; n > 0 {
					msg += fmt.Sprintf(" (and %d more)", n)
				}
			} else if p.Problem != "" {
				msg, _, _ = strings.Cut(p.Problem, "\n")
			}
			if p.Flaky() {
				typ, msg = "LabStepFlaky", fmt.Sprintf("flaky: passed %d of %d runs; %s", p.Passes, p.Runs, msg)
			}
			tc.Failure = &JUnitFailure{Message: msg, Type: typ, Text: p.Explain()}
		}
		out = append(out, tc)
	}
	return out
}

// JUnit XML is shared with internal/grade and internal/isolate.

// JUnit XML is read by CI systems; the strictest common reader is Jenkins'
// xUnit plugin, which validates every file against its junit-10.xsd and
// skips a file that fails. So the shape below follows that schema: each
// <testsuite> carries name, tests, failures and errors; a <testcase> holds
// only failure, skipped and system-out (no properties), and times are plain
// decimal seconds. internal/junittest checks the output with xmllint.

// JUnitSuite is one <testsuite>. EncodeJUnit fills its tests, failures,
// errors and skipped counts from its cases.
type JUnitSuite struct {
	XMLName   xml.Name        `xml:"testsuite"`
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"` // parts the lab could not judge (not judged: an error, not a failure)
	Skipped   int             `xml:"skipped,attr"`
	Time      JUnitSeconds    `xml:"time,attr"`
	Props     JUnitProperties `xml:"properties,omitempty"`
	Cases     []JUnitCase     `xml:"testcase"`
	SystemOut string          `xml:"system-out,omitempty"`
}

// JUnitCase is one <testcase>: a failure when Failure is set, an error
// (not judged) when Error is, skipped when Skipped is. The schema forbids <properties> inside a testcase, so
// EncodeJUnit moves Props up to the suite's properties, each named
// "CASE.NAME" (step8_crash.points): a per-step figure stays in the file
// where every reader accepts it.
type JUnitCase struct {
	Name      string          `xml:"name,attr"`
	Classname string          `xml:"classname,attr"`
	Time      JUnitSeconds    `xml:"time,attr"`
	Props     JUnitProperties `xml:"-"`
	Failure   *JUnitFailure   `xml:"failure,omitempty"`
	Error     *JUnitFailure   `xml:"error,omitempty"` // not judged: the grader's trouble, not the code's
	Skipped   *JUnitFailure   `xml:"skipped,omitempty"`
	SystemOut string          `xml:"system-out,omitempty"`
}

// JUnitFailure is a <failure> (or <skipped>): a one-line message, its type
// and the full text.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnitProperties is a <properties> element, left out when empty (an
// a>b field path would write an empty parent).
type JUnitProperties []JUnitProperty

// MarshalXML writes <properties> holding one <property> each.
func (ps JUnitProperties) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return e.EncodeElement(struct {
		P []JUnitProperty `xml:"property"`
	}{ps}, start)
}

// JUnitProperty is one <property name value>.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitSeconds is a time attribute: seconds with three decimals ("0.210").
type JUnitSeconds float64

// MarshalXMLAttr writes s with three decimals.
func (s JUnitSeconds) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	return xml.Attr{Name: name, Value: strconv.FormatFloat(float64(s), 'f', 3, 64)}, nil
}

// JUnitCaseName names a step's testcase: "step8_crash".
func JUnitCaseName(num int, slug string) string {
	return fmt.Sprintf("step%d_%s", num, strings.ReplaceAll(slug, "-", "_"))
}

// EncodeJUnit writes an XML header and the suites inside <testsuites>,
// indented, with each suite's counts taken from its cases, each case's
// properties moved up to its suite (see JUnitCase), and the property
// contract_version (result.ContractVersion) on every suite.
func EncodeJUnit(w io.Writer, suites ...JUnitSuite) error {
	suites = slices.Clone(suites)
	for i := range suites {
		s := &suites[i]
		s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), 0, 0, 0
		s.Props = slices.Clone(s.Props)
		if !slices.ContainsFunc(s.Props, func(p JUnitProperty) bool { return p.Name == "contract_version" }) {
			s.Props = append(JUnitProperties{{Name: "contract_version", Value: strconv.Itoa(result.ContractVersion)}}, s.Props...)
		}
		for _, c := range s.Cases {
			if c.Failure != nil {
				s.Failures++
			}
			if c.Error != nil {
				s.Errors++
			}
			if c.Skipped != nil {
				s.Skipped++
			}
			for _, p := range c.Props {
				s.Props = append(s.Props, JUnitProperty{Name: c.Name + "." + p.Name, Value: p.Value})
			}
		}
	}
	root := struct {
		XMLName xml.Name     `xml:"testsuites"`
		Suites  []JUnitSuite `xml:"testsuite"`
	}{Suites: suites}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
