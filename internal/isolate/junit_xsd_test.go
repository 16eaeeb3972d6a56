package isolate_test

import (
	"bytes"
	"testing"

	"snacklab/internal/isolate"
	"snacklab/internal/junittest"
)

// The isolated runner's junit.xml passes the schema Jenkins' xUnit plugin
// validates against (a file that fails is skipped, so a CI user sees nothing).
func TestJUnitValidatesAgainstSchema(t *testing.T) {
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, "",
		isolate.Marker+"\n"+labJSON(t, passed(1, 2), failedCheck(2)), 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := isolate.WriteJUnit(&b, o); err != nil {
		t.Fatal(err)
	}
	junittest.Validate(t, "isolate junit.xml", b.Bytes())
}
