package scrub_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"strings"
	"testing"

	"snacklab/internal/scrub"
)

const (
	stage = "/tmp/snacklab-isolate-42"
	bin   = "/srv/grades/bob/bin"
	work  = "/srv/grades/bob/logs/snacklab-step2-77"
)

func TestString(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	h := func(s string) string { return hex.EncodeToString([]byte(s)) }
	mountinfo := "2 1 8:1 " + stage + "/sub /sub ro - ext4 /dev/sda1 rw"
	s := scrub.New(bin, work)
	for _, tc := range []struct{ name, in, want string }{
		{"plain text stays", "3 checks passed; github.com/x/sub/pkg and /srcdir stay", "3 checks passed; github.com/x/sub/pkg and /srcdir stay"},
		{"staging dir", "open " + stage + "/sub/queuectl: denied", "open [grader]/sub/queuectl: denied"},
		{"staging dir inside a word", "x" + stage + "/sub and lowerdir=/a/b" + stage + "/sub", "[grader]/sub and lowerdir=[grader]/sub"},
		{"staging dir of a build", "/var/tmp/snacklab-isolate-build-991/src/main.go:3", "[grader]/src/main.go:3"},
		{"staging dir relative", "tmp/snacklab-isolate-7/sub", "[grader]/sub"},
		{"docker paths", "upperdir=/var/lib/docker/overlay2/123/diff,workdir=/run/containerd/x y", "upperdir=[grader],workdir=[grader] y"},
		{"dirs passed in, anywhere", "ran " + bin + "/queuectl --db=" + work + "/queue.db x" + bin, "ran [grader]/queuectl --db=[grader]/queue.db x[grader]"},
		{"base64 of the staging path", "leak: " + b64([]byte(mountinfo)) + " end", "leak: [grader] end"},
		{"base64 at an odd offset in the word", "k=" + b64([]byte("xy"+stage)), "k=[grader]"},
		{"url base64 of a dir passed in", base64.RawURLEncoding.EncodeToString([]byte("cwd " + work)), "[grader]"},
		{"base64 of a docker path", b64([]byte("/var/lib/docker/containers/abc/hostname")), "[grader]"},
		{"hex of the staging path", "h " + h(mountinfo), "h [grader]"},
		{"hex at an odd offset", "a" + h(bin+"/queuectl"), "[grader]"},
		{"base64 of hex", b64([]byte(h(stage))), "[grader]"},
		{"base64 of harmless text stays", b64([]byte("order 42 delivered twice")), b64([]byte("order 42 delivered twice"))},
	} {
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// Relative dirs read as the learner's own names; one-component container
// dirs only where a path starts.
func TestRelative(t *testing.T) {
	s := scrub.New().Relative(bin, work, "/sub", "/src")
	for _, tc := range []struct{ in, want string }{
		{"ran " + bin + "/queuectl --db " + work + "/queue.db init", "ran queuectl --db queue.db init"},
		{"cwd " + work + " and x" + bin, "cwd . and x."},
		{"in the container: /sub/sender --db x", "in the container: sender --db x"},
		{"github.com/x/sub/pkg and /srcdir stay", "github.com/x/sub/pkg and /srcdir stay"},
		{"build: /src/cmd/queuectl/main.go:3: bad", "build: cmd/queuectl/main.go:3: bad"},
		{stage + "/sub/queuectl", "[grader]/sub/queuectl"},
	} {
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// The mark survives XML: an attribute holding it is still well formed and
// reads back as written.
func TestMarkInXML(t *testing.T) {
	var b strings.Builder
	type tc struct {
		Name string `xml:"name,attr"`
	}
	if err := xml.NewEncoder(&b).Encode(tc{Name: scrub.New().String(stage + "/sub")}); err != nil {
		t.Fatal(err)
	}
	var got tc
	if err := xml.Unmarshal([]byte(b.String()), &got); err != nil || got.Name != "[grader]/sub" {
		t.Errorf("XML round trip: got %q, %v; want %q", got.Name, err, "[grader]/sub")
	}
}

// JSON reaches every string field at any depth, map keys included, and
// leaves numbers whole.
func TestJSON(t *testing.T) {
	type inner struct {
		Observed string
		Seed     int64
	}
	type report struct {
		Reason   string
		Reported []inner
		Labels   map[string]string
		Ptr      *inner
		private  string
	}
	leak := "saw " + stage + "/sub"
	r := report{Reason: leak, Reported: []inner{{Observed: leak, Seed: 1<<62 + 1}},
		Labels: map[string]string{stage: leak}, Ptr: &inner{Observed: "/var/lib/docker/x"}, private: "kept"}
	if err := scrub.New().JSON(&r); err != nil {
		t.Fatal(err)
	}
	want := "saw [grader]/sub"
	if r.Reason != want || r.Reported[0].Observed != want || r.Labels["[grader]"] != want || r.Ptr.Observed != "[grader]" {
		t.Errorf("JSON: got %+v %+v; want every string scrubbed to %q", r, *r.Ptr, want)
	}
	if r.Reported[0].Seed != 1<<62+1 || r.private != "kept" {
		t.Errorf("JSON: got seed %d private %q; want %d and %q", r.Reported[0].Seed, r.private, int64(1<<62+1), "kept")
	}
}

// BenchmarkStringNarrative scrubs a 4 MiB step narrative in which every
// line names the work dir (the worst ordinary case: a relative rewrite on
// each line, and words the base64 scan must look at).
func BenchmarkStringNarrative(b *testing.B) {
	line := "[  123.4ms] A: {\"event\":\"claimed\",\"id\":\"order-000123\",\"token\":2,\"lease_until\":1700000000123} " + work + "/queue.db\n"
	text := strings.Repeat(line, (4<<20)/len(line))
	s := scrub.New(bin).Relative(work)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s.String(text)
	}
}
