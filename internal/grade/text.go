package grade

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"snacklab/labsteps/result"
)

// Every byte a submission produced — build output, file names, what its
// programs printed — reaches the reports, and none of it is trusted as
// text: an escape sequence rewrites a teacher's terminal line (a fake
// "100/100"), a U+0001 makes an XML or HTML consumer choke, a bidi override
// reorders what a reader sees. So before any report is written, text is
// made plain: valid UTF-8, no control characters but newline and tab, no
// bidi controls. Markdown and HTML escaping come on top, per format.

// Clean returns s as plain printable text: invalid UTF-8 becomes U+FFFD,
// C0 and C1 control characters (ESC, BEL, CR, U+0001, U+009B…) and DEL
// become U+FFFD, except newline and tab; bidi and other invisible format
// characters are removed.
func Clean(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			b.WriteRune(utf8.RuneError)
		case unicode.Is(unicode.Cf, r):
			// format characters: bidi overrides, zero-width joiners, BOM
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPlain is the fast path of Clean: printable ASCII, newline and tab.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// cleanLine is Clean on one line: newlines and tabs become spaces too.
func cleanLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(Clean(s))
}

// cleanRecord makes every text field of a record plain.
func cleanRecord(r Record) Record {
	r.Source, r.Problem, r.Bin, r.BuildOut = Clean(r.Source), Clean(r.Problem), Clean(r.Bin), Clean(r.BuildOut)
	r.Mode = Clean(r.Mode)
	steps := make([]StepRecord, len(r.Steps))
	for i, s := range r.Steps {
		s.Reason, s.Replay, s.Output, s.Title = cleanLine(s.Reason), cleanLine(s.Replay), Clean(s.Output), cleanLine(s.Title)
		s.Parts = append([]PartRecord(nil), s.Parts...)
		for j := range s.Parts {
			pr := &s.Parts[j]
			pr.Name, pr.Reason, pr.Output = cleanLine(pr.Name), cleanLine(pr.Reason), Clean(pr.Output)
			pr.Clauses = append([]string(nil), pr.Clauses...)
			for k := range pr.Clauses {
				pr.Clauses[k] = cleanLine(pr.Clauses[k])
			}
		}
		s.Kept = append([]string(nil), s.Kept...)
		for j := range s.Kept {
			s.Kept[j] = cleanLine(s.Kept[j])
		}
		steps[i] = s
	}
	r.Steps = steps
	return r
}

// CleanResult makes a lab result's texts plain before any report is made
// of them.
func CleanResult(r result.Result) result.Result {
	r.Narrative, r.Problem, r.Dir, r.LogDir = Clean(r.Narrative), Clean(r.Problem), Clean(r.Dir), Clean(r.LogDir)
	r.Checks = append([]result.Check(nil), r.Checks...)
	for i := range r.Checks {
		c := &r.Checks[i]
		c.What, c.Expected, c.Observed, c.Why, c.Part = Clean(c.What), Clean(c.Expected), Clean(c.Observed), Clean(c.Why), Clean(c.Part)
	}
	r.Parts = append([]string(nil), r.Parts...)
	for i := range r.Parts {
		r.Parts[i] = Clean(r.Parts[i])
	}
	r.Events = append([]result.Event(nil), r.Events...)
	for i := range r.Events {
		e := &r.Events[i]
		e.Text, e.Lane, e.Section = Clean(e.Text), Clean(e.Lane), Clean(e.Section)
	}
	return r
}

// mdText escapes text for Markdown: no raw HTML (< > &), no links or images
// ([ ] ( ) !), no emphasis or code that would swallow the rest of a line,
// no table cell breaks, one line.
func mdText(s string) string {
	s = cleanLine(s)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '(', ')', '!', '|', '#', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdCode is s as an inline code span: a fence of backticks longer than any
// run inside it, so nothing in s ends the span; a pipe is escaped for tables.
func mdCode(s string) string {
	s = cleanLine(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
