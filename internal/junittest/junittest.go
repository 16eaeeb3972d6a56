// Package junittest checks JUnit XML the way the strictest common consumer
// does: Jenkins' xUnit plugin validates each file against its junit-10.xsd
// and skips one that fails, so a CI user would silently get no results.
// Validate runs the real validator, xmllint, against testdata/junit.xsd, our
// own schema expressing that one's constraints for what snacklab emits.
package junittest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed testdata/junit.xsd
var schema []byte

// RequireEnv names the variable that turns a missing xmllint into a failure
// (CI sets it) instead of a skip.
const RequireEnv = "SNACKLAB_REQUIRE_XMLLINT"

// Validate fails tb when doc is not valid JUnit XML for Jenkins, quoting
// xmllint's complaint and the document. Without xmllint on PATH it skips,
// unless SNACKLAB_REQUIRE_XMLLINT=1.
func Validate(tb testing.TB, name string, doc []byte) {
	tb.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		const how = "no xmllint on PATH (Debian: apt-get install -y libxml2-utils)"
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s, and %s=1 requires it", how, RequireEnv)
		}
		tb.Skipf("%s; set %s=1 to fail instead of skipping", how, RequireEnv)
	}
	dir := tb.TempDir()
	xsd, file := filepath.Join(dir, "junit.xsd"), filepath.Join(dir, "doc.xml")
	if err := os.WriteFile(xsd, schema, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command(xmllint, "--noout", "--schema", xsd, file).CombinedOutput()
	if err != nil {
		tb.Errorf("%s: expected JUnit XML valid against Jenkins xUnit's junit-10.xsd rules (a file that fails is skipped by the plugin, so a CI user sees no results); xmllint says: %v\n%s\n--- %s ---\n%s",
			name, err, out, name, doc)
	}
}
