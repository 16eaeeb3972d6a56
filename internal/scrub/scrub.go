// Package scrub is the one filter every text a student sees passes through
// on its way out of the grader: it takes out the grading machine's own
// paths, plainly written or base64- or hex-encoded. A submission's
// programs can read those paths (in /proc/self/mountinfo, their cwd, their
// argv) and print them in any form; what leaves the judge must name
// nothing of the machine that judged it.
//
// What it removes: the isolate staging directories (any path with a
// component snacklab-isolate-…, wherever it starts in a word), the
// container engine's paths (/var/lib/docker/…, /run/containerd/…), and the
// directories the caller passes in (the lab's bin and work dirs, the output
// dir). Each becomes Mark, or, for directories the caller asks to show as
// relative names, the name below it.
package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Mark replaces a path of the grader. It holds no character XML or HTML
// escapes ('<' once broke JUnit attribute values), nor any a shell or
// Markdown table treats specially.
const Mark = "[grader]"

// sep is what ends a path in running text.
const sep = `\s'"=:,;()<>\x60\[\]`

var (
	// staging matches a path through an isolate staging directory, from
	// wherever the path starts in its word to the end of the staging
	// component: /tmp/x/snacklab-isolate-42, a/b/snacklab-isolate-build-7.
	staging = regexp.MustCompile(`(?:[^` + sep + `]*/)?[^` + sep + `/]*snacklab-isolate-[^` + sep + `/]*`)
	// engine matches the container engine's own paths (the root file
	// system's layers, a container's hostname and hosts files).
	engine = regexp.MustCompile(`/(?:var/lib|run)/(?:docker|containerd)[^` + sep + `]*`)
)

// Scrubber removes a fixed set of the grader's paths from text.
type Scrubber struct {
	hide []string // replaced by Mark, anywhere
	rel  []string // shown relative: dir/x → x, dir → .
}

// New returns a Scrubber hiding the given directories (and, always, the
// staging and engine paths). Empty names and "/" are ignored.
func New(hide ...string) *Scrubber {
	return &Scrubber{hide: dirs(hide)}
}

// Relative returns a copy of s that shows the given directories as
// relative names instead of Mark: a learner reads "queuectl" and "queue.db"
// where the grader ran /grades/bob/bin/queuectl in its work dir. A
// directory of one component (/sub, /src: a container's paths) is matched
// only where a word or path starts, so github.com/x/sub/pkg stays whole;
// a deeper one anywhere.
func (s *Scrubber) Relative(rel ...string) *Scrubber {
	return &Scrubber{hide: s.hide, rel: dirs(append(slices.Clone(s.rel), rel...))}
}

// dirs cleans ds, drops "" and "/", and sorts the longest first so a dir
// is replaced before its parent.
func dirs(ds []string) []string {
	var out []string
	for _, d := range ds {
		if d == "" {
			continue
		}
		if d = filepath.Clean(d); d != "/" && d != "." && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// String returns text with every path of the grader taken out.
func (s *Scrubber) String(text string) string {
	return s.scrub(text, 2)
}

// scrub is String with depth levels of decoding left: a path encoded twice
// (base64 of hex) is still found; deeper nesting is not looked for.
func (s *Scrubber) scrub(text string, depth int) string {
	if depth > 0 {
		text = s.encodedRuns(text, depth)
	}
	// Relative names first: a Mark is a separator, and /sub after it
	// would then read as a path of its own.
	for _, d := range s.rel {
		text = relative(text, d)
	}
	for _, d := range s.hide {
		text = strings.ReplaceAll(text, d, Mark)
	}
	// The patterns run only where their fixed part occurs: most text
	// holds neither, and the scan is cheap next to the regexp.
	if strings.Contains(text, "snacklab-isolate-") {
		text = staging.ReplaceAllString(text, Mark)
	}
	if strings.Contains(text, "/docker") || strings.Contains(text, "/containerd") {
		text = engine.ReplaceAllString(text, Mark)
	}
	return text
}

// relative rewrites d in text as the student names it: d/x is x, d alone
// is ".". A deep d is matched anywhere; a one-component d only where a
// path starts. It must end at a separator or a slash. (A plain scan: the
// regexp it replaced was most of the time of a 4 MiB narrative.)
func relative(text, d string) string {
	anywhere := strings.Count(d, "/") > 1
	var out strings.Builder
	last := 0 // text[last:] is not yet copied to out
	for i := 0; i < len(text); {
		k := strings.Index(text[i:], d)
		if k < 0 {
			break
		}
		k += i
		end := k + len(d)
		startOK := anywhere || k == 0 || isSep(text[k-1])
		switch {
		case startOK && end < len(text) && text[end] == '/':
			out.WriteString(text[last:k])
			last = end + 1
		case startOK && (end == len(text) || isSep(text[end])):
			out.WriteString(text[last:k])
			out.WriteString(".")
			last = end
		default:
			i = k + 1
			continue
		}
		i = last
	}
	if last == 0 {
		return text
	}
	out.WriteString(text[last:])
	return out.String()
}

// isSep: c ends a path in running text (sep's characters).
func isSep(c byte) bool {
	return strings.IndexByte(" \t\n\v\f\r'\"=:,;()<>`[]", c) >= 0
}

// encodedRuns replaces with Mark every base64 or hex run of text whose
// decoding, at any alignment, names a path of the grader. Runs are found
// by a plain scan: a regexp over megabytes of narrative was most of the
// scrubber's time.
func (s *Scrubber) encodedRuns(text string, depth int) string {
	leaks := func(b []byte) bool {
		// Most runs are words, not encodings: their decoding is binary
		// noise, which names no path; only text is looked into.
		return printable(b) && s.scrub(string(b), depth-1) != string(b)
	}
	var out strings.Builder
	last := 0 // text[last:] is not yet copied to out
	for i := 0; i < len(text); {
		if !isB64(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isB64(text[j]) {
			j++
		}
		for k := 0; k < 2 && j < len(text) && text[j] == '='; k++ {
			j++
		}
		if run := text[i:j]; j-i >= minRun && s.encodedLeak(run, leaks) {
			out.WriteString(text[last:i])
			out.WriteString(Mark)
			last = j
		}
		i = j
	}
	if last == 0 {
		return text
	}
	out.WriteString(text[last:])
	return out.String()
}

// minRun is the shortest run looked into: 9 bytes encoded, shorter than
// any path worth hiding.
const minRun = 12

// encodedLeak: run, as base64 at any alignment, or any hex stretch of it,
// decodes to text that leaks.
func (s *Scrubber) encodedLeak(run string, leaks func([]byte) bool) bool {
	for _, b := range decodeBase64(run) {
		if leaks(b) {
			return true
		}
	}
	for i := 0; i < len(run); {
		if !isHex(run[i]) {
			i++
			continue
		}
		j := i
		for j < len(run) && isHex(run[j]) {
			j++
		}
		if j-i >= minRun {
			for off := 0; off < 2; off++ {
				h := run[i+off : j]
				if b, err := hex.DecodeString(h[:len(h)&^1]); err == nil && leaks(b) {
					return true
				}
			}
		}
		i = j
	}
	return false
}

func isB64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// printable: b is mostly text (a path, a line of mountinfo, an encoding
// of them), not the noise a word decodes to.
func printable(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	n := 0
	for _, c := range b {
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			n++
		}
	}
	return n*10 >= len(b)*9
}

// decodeBase64 decodes run at each of its four alignments (the encoded
// text may start anywhere in the word), in both alphabets, dropping a
// trailing partial group.
func decodeBase64(run string) [][]byte {
	run = strings.TrimRight(run, "=")
	var out [][]byte
	for off := 0; off < 4 && off < len(run); off++ {
		r := run[off:]
		r = r[:len(r)&^3]
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(r); err == nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// JSON scrubs every string of *v (field values and map keys, at any
// depth) through a JSON round trip, so a field added later is covered
// without a line here. v must be a pointer to a value that JSON encodes
// and decodes losslessly apart from its strings; fields JSON skips
// (unexported, `json:"-"`) are left as they were.
func (s *Scrubber) JSON(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("scrub: encode: %w", err)
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // an int64 (a seed) must come back whole, not as a float64
	if err := dec.Decode(&tree); err != nil {
		return fmt.Errorf("scrub: decode: %w", err)
	}
	if raw, err = json.Marshal(s.tree(tree)); err != nil {
		return fmt.Errorf("scrub: encode: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("scrub: decode back: %w", err)
	}
	return nil
}

// tree scrubs the strings of a decoded JSON value.
func (s *Scrubber) tree(v any) any {
	switch v := v.(type) {
	case string:
		return s.String(v)
	case []any:
		for i := range v {
			v[i] = s.tree(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[s.String(k)] = s.tree(x)
		}
		return out
	}
	return v
}
