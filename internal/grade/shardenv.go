package grade

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ShardsEnv is the environment variable that gives `--shard auto` the
// number of shards when --shards does not: a Kubernetes Indexed Job gives
// each pod its index (JOB_COMPLETION_INDEX) but not the Job's completions.
const ShardsEnv = "SNACKLAB_SHARDS"

// ErrNoShardEnv means `--shard auto` found none of the variables of
// ShardSources in the environment.
var ErrNoShardEnv = errors.New("no shard index in the environment")

// ShardSource is an engine that runs one copy of a command per shard and
// tells each copy its index (and, for CI systems, the count) in variables.
type ShardSource struct {
	Engine string // who sets the variables
	Index  string // the index variable
	Total  string // the count variable; "" when the engine gives none
	Base   int    // the first index: 0, or 1 for GitLab
}

// ShardSources are the engines `--shard auto` reads, in this order.
// GitLab's CI_NODE_INDEX counts from 1 (parallel: N gives 1…N); the others
// count from 0, as --shard does.
var ShardSources = []ShardSource{
	{Engine: "a Kubernetes Indexed Job", Index: "JOB_COMPLETION_INDEX", Base: 0},
	{Engine: "GitLab CI (parallel:)", Index: "CI_NODE_INDEX", Total: "CI_NODE_TOTAL", Base: 1},
	{Engine: "Buildkite (parallelism:)", Index: "BUILDKITE_PARALLEL_JOB", Total: "BUILDKITE_PARALLEL_JOB_COUNT", Base: 0},
	{Engine: "CircleCI (parallelism:)", Index: "CIRCLE_NODE_INDEX", Total: "CIRCLE_NODE_TOTAL", Base: 0},
}

// AutoShard resolves `--shard auto`: the index from the first of
// ShardSources whose variables are set, the count from that engine's own
// variable, or from shards (--shards; 0 when not given), or from ShardsEnv.
// Every value that is given must agree with the others: two engines'
// variables naming different shards, --shards against SNACKLAB_SHARDS or a
// CI's count, an index without a count, a count without its index, or an
// index out of range are errors, never a guess, because a wrong guess grades
// a slice twice or not at all. getenv is os.Getenv outside tests. The
// returned text says where the shard came from, for the log.
func AutoShard(shards int, getenv func(string) string) (Shard, string, error) {
	count, countFrom := 0, ""
	if shards < 0 {
		return Shard{}, "", fmt.Errorf("--shards %d: want a count of at least 1", shards)
	}
	if shards > 0 {
		count, countFrom = shards, fmt.Sprintf("--shards %d", shards)
	}
	if v := getenv(ShardsEnv); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return Shard{}, "", fmt.Errorf("%s=%q: want a count of at least 1", ShardsEnv, v)
		}
		if count != 0 && n != count {
			return Shard{}, "", fmt.Errorf("%s and %s=%d disagree: give the count once", countFrom, ShardsEnv, n)
		}
		if count == 0 {
			count, countFrom = n, fmt.Sprintf("%s=%d", ShardsEnv, n)
		}
	}

	var found Shard
	var from string
	for _, src := range ShardSources {
		iv, tv := getenv(src.Index), ""
		if src.Total != "" {
			tv = getenv(src.Total)
		}
		if iv == "" && tv == "" {
			continue
		}
		if iv == "" {
			return Shard{}, "", fmt.Errorf("%s=%s is set but %s is not: %s gives both", src.Total, tv, src.Index, src.Engine)
		}
		i, err := strconv.Atoi(strings.TrimSpace(iv))
		if err != nil || i < src.Base {
			return Shard{}, "", fmt.Errorf("%s=%q: want an index of at least %d (%s)", src.Index, iv, src.Base, src.Engine)
		}
		s := Shard{I: i - src.Base}
		what := fmt.Sprintf("%s=%d", src.Index, i)
		switch {
		case tv != "":
			n, err := strconv.Atoi(strings.TrimSpace(tv))
			if err != nil || n < 1 {
				return Shard{}, "", fmt.Errorf("%s=%q: want a count of at least 1 (%s)", src.Total, tv, src.Engine)
			}
			if count != 0 && n != count {
				return Shard{}, "", fmt.Errorf("%s=%d and %s disagree on the number of shards", src.Total, n, countFrom)
			}
			s.N, what = n, what+fmt.Sprintf(" and %s=%d", src.Total, n)
		case src.Total != "":
			return Shard{}, "", fmt.Errorf("%s=%s is set but %s is not: %s gives both", src.Index, iv, src.Total, src.Engine)
		case count == 0:
			return Shard{}, "", fmt.Errorf("%s=%d gives the shard's index but not the number of shards: pass --shards N (the Job's completions) or set %s",
				src.Index, i, ShardsEnv)
		default:
			s.N, what = count, what+" and "+countFrom
		}
		if s.I >= s.N {
			return Shard{}, "", fmt.Errorf("%s: index %d is out of range for %d shards (%s)", what, i, s.N, src.Engine)
		}
		if from != "" && s != found {
			return Shard{}, "", fmt.Errorf("%s says shard %s but %s says %s: unset one", from, found, what, s)
		}
		if from == "" {
			found, from = s, what
		}
	}
	if from == "" {
		var names []string
		for _, src := range ShardSources {
			names = append(names, src.Index)
		}
		return Shard{}, "", fmt.Errorf("--shard auto: %w (looked for %s); outside such an engine give --shard i/n", ErrNoShardEnv, strings.Join(names, ", "))
	}
	return found, fmt.Sprintf("shard %s from %s", found, from), nil
}

// ExpandCohort expands the arguments that are glob patterns (a quoted
// `/cohort/*`) the way a shell would, sorted, for where no shell runs the
// command: a pod's args, a FROM scratch image. An argument that exists as
// written is kept as it is, whatever its characters; a pattern that matches
// nothing is an error, since grading "no submissions" of a mistyped path
// would succeed silently.
func ExpandCohort(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if _, err := os.Lstat(a); err == nil || !strings.ContainsAny(a, "*?[") {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("submission pattern %q: %w", a, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("submission pattern %q matches nothing", a)
		}
		out = append(out, m...)
	}
	return out, nil
}
