package clauses

import (
	"regexp"
	"strings"
)

// cited is a clause id as the changelog cites it: in backquotes.
var cited = regexp.MustCompile("`(" + idPattern + ")`")

// Changelog reads the newest version's section of the contract's changelog
// (the "## N. Changelog" section's first "### Version V" heading): version
// is V, and lines maps each clause id that section cites to the part of its
// changelog entry that cites it (the entry's sentence between semicolons,
// on one line), so a failure on a rule that changed can say how. An id
// cited twice keeps its first entry. No changelog: "" and no lines.
func Changelog(contract []byte) (version string, lines map[string]string) {
	s := string(contract)
	lines = map[string]string{}
	at := 0
	for l := range strings.SplitAfterSeq(s, "\n") {
		at += len(l)
		if strings.HasPrefix(l, "## ") && strings.Contains(l, "Changelog") {
			break
		}
	}
	s = s[at:] // empty when there is no changelog
	head := strings.Index(s, "### Version ")
	if head < 0 {
		return "", lines
	}
	s = s[head+len("### Version "):]
	nl := strings.IndexByte(s, '\n')
	if nl < 0 {
		return "", lines
	}
	version, _, _ = strings.Cut(strings.TrimSpace(s[:nl]), " ")
	s = s[nl+1:]
	if end := strings.Index(s, "\n### "); end >= 0 {
		s = s[:end]
	}
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	for _, item := range entries(s) {
		lead := leadIn(item)
		for i, seg := range strings.Split(item, "; ") {
			line := strings.TrimSuffix(strings.TrimSpace(seg), ".")
			if i > 0 && lead != "" {
				line = lead + " … " + line
			}
			for _, m := range cited.FindAllStringSubmatch(seg, -1) {
				if _, ok := lines[m[1]]; !ok {
					lines[m[1]] = line
				}
			}
		}
	}
	return version, lines
}

// entries splits a changelog section into its list items and paragraphs,
// each on one line.
func entries(s string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "- "):
			flush()
			cur = append(cur, strings.TrimPrefix(l, "- "))
		default:
			cur = append(cur, l)
		}
	}
	flush()
	return out
}

// leadIn is what an entry says of all its sentences ("Sender:", "Added in
// version 2 as options (…):"): its text up to the first ": " when that
// comes before any cited id, outside parentheses; else "".
func leadIn(item string) string {
	i := strings.Index(item, ": ")
	if i < 0 {
		return ""
	}
	head := item[:i+1]
	if cited.MatchString(head) || strings.Count(head, "(") != strings.Count(head, ")") {
		return ""
	}
	return head
}
