package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
)

// Observed is what one queuectl process did.
type Observed struct {
	Exit   int
	Signal string // the signal that ended it ("" when it exited): a crash is an answer too
	Stdout string
	Stderr string
}

// Diff says how obs departs from exp, or "" when it matches: the exit code
// first (§6.codes), then stdout — empty for a refusal (exit 2–11,
// §3.stdout.refusal), else exactly one JSON object (§3.json.one) whose
// pinned members equal the model's. Members the model does not name are
// free.
func Diff(exp Expect, obs Observed) string {
	if obs.Signal != "" {
		return fmt.Sprintf("ended by %s, want exit %d", obs.Signal, exp.Exit)
	}
	if obs.Exit != exp.Exit {
		return fmt.Sprintf("exit %d, want %d", obs.Exit, exp.Exit)
	}
	if exp.JSON == nil {
		if obs.Stdout != "" {
			return fmt.Sprintf("stdout %q, want nothing on a refusal (§3.stdout.refusal)", obs.Stdout)
		}
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(obs.Stdout)))
	dec.UseNumber()
	var got map[string]any
	if err := dec.Decode(&got); err != nil {
		return fmt.Sprintf("stdout is not one JSON object (§3.json.one): %v", err)
	}
	if dec.More() {
		return "stdout has more than one JSON value (§3.json.one)"
	}
	keys := make([]string, 0, len(exp.JSON))
	for k := range exp.JSON {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, present := got[k]; !present { // null is an answer; a missing member is not
			return fmt.Sprintf("%s is missing, want %s", k, show(exp.JSON[k]))
		}
		d := diffValue(exp.JSON[k], got[k], k)
		if d != "" && slices.Contains(exp.EitherOrder, k) {
			if l, ok := exp.JSON[k].([]any); ok {
				r := slices.Clone(l)
				slices.Reverse(r)
				if diffValue(r, got[k], k) == "" {
					d = ""
				}
			}
		}
		if d != "" {
			return d
		}
	}
	return ""
}

// diffValue compares one expected member with the decoded one; numbers are
// compared by value, so 5 and 5.0 are one number.
func diffValue(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s is %s, want an object", path, show(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, present := g[k]; !present {
				return fmt.Sprintf("%s.%s is missing, want %s", path, k, show(w[k]))
			}
			if d := diffValue(w[k], g[k], path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s is %s, want %s", path, show(got), show(want))
		}
		for i := range w {
			if d := diffValue(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case int64:
		n, ok := got.(json.Number)
		if !ok {
			return fmt.Sprintf("%s is %s, want %d", path, show(got), w)
		}
		f, _, err := big.ParseFloat(n.String(), 10, 200, big.ToNearestEven)
		if err != nil || f.Cmp(new(big.Float).SetInt64(w)) != 0 {
			return fmt.Sprintf("%s is %s, want %d", path, n, w)
		}
		return ""
	default: // string, bool, nil
		if got != want {
			return fmt.Sprintf("%s is %s, want %s", path, show(got), show(want))
		}
		return ""
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
