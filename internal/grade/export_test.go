package grade

// StudentText is what fold does to a step's text before a learner sees it.
func StudentText(out, tmp, text string, dirs ...string) string {
	g := &grader{cfg: Config{Out: out}, tmp: tmp}
	return g.student(text, dirs...)
}
