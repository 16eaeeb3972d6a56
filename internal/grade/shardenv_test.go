package grade_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"snacklab/internal/grade"
)

func TestAutoShard(t *testing.T) {
	cases := []struct {
		name   string
		shards int
		env    map[string]string
		want   grade.Shard
		from   string // in the description
		errHas string // "" when it must succeed
	}{
		{name: "kubernetes index and --shards", shards: 4, env: map[string]string{"JOB_COMPLETION_INDEX": "2"},
			want: grade.Shard{I: 2, N: 4}, from: "JOB_COMPLETION_INDEX=2 and --shards 4"},
		{name: "kubernetes index and SNACKLAB_SHARDS", env: map[string]string{"JOB_COMPLETION_INDEX": "0", "SNACKLAB_SHARDS": "3"},
			want: grade.Shard{I: 0, N: 3}, from: "SNACKLAB_SHARDS=3"},
		{name: "flag and env agree", shards: 3, env: map[string]string{"JOB_COMPLETION_INDEX": "1", "SNACKLAB_SHARDS": "3"},
			want: grade.Shard{I: 1, N: 3}},
		{name: "gitlab counts from 1", env: map[string]string{"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "5"},
			want: grade.Shard{I: 0, N: 5}, from: "CI_NODE_INDEX=1 and CI_NODE_TOTAL=5"},
		{name: "gitlab last node", env: map[string]string{"CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "5"},
			want: grade.Shard{I: 4, N: 5}},
		{name: "buildkite", env: map[string]string{"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "4"},
			want: grade.Shard{I: 3, N: 4}},
		{name: "circleci", shards: 2, env: map[string]string{"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "2"},
			want: grade.Shard{I: 0, N: 2}},
		{name: "two engines that agree", env: map[string]string{"JOB_COMPLETION_INDEX": "1", "SNACKLAB_SHARDS": "2", "CIRCLE_NODE_INDEX": "1", "CIRCLE_NODE_TOTAL": "2"},
			want: grade.Shard{I: 1, N: 2}},

		{name: "nothing set", shards: 4, errHas: "no shard index in the environment"},
		{name: "kubernetes index without a count", env: map[string]string{"JOB_COMPLETION_INDEX": "2"}, errHas: "pass --shards N"},
		{name: "index out of range", shards: 2, env: map[string]string{"JOB_COMPLETION_INDEX": "2"}, errHas: "out of range for 2 shards"},
		{name: "gitlab index 0", env: map[string]string{"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "2"}, errHas: "at least 1"},
		{name: "gitlab index past total", env: map[string]string{"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "2"}, errHas: "out of range"},
		{name: "not a number", shards: 2, env: map[string]string{"JOB_COMPLETION_INDEX": "one"}, errHas: `JOB_COMPLETION_INDEX="one"`},
		{name: "negative index", shards: 2, env: map[string]string{"JOB_COMPLETION_INDEX": "-1"}, errHas: "at least 0"},
		{name: "bad env count", env: map[string]string{"JOB_COMPLETION_INDEX": "0", "SNACKLAB_SHARDS": "0"}, errHas: "SNACKLAB_SHARDS=\"0\""},
		{name: "negative --shards", shards: -1, env: map[string]string{"JOB_COMPLETION_INDEX": "0"}, errHas: "--shards -1"},
		{name: "flag and env disagree", shards: 4, env: map[string]string{"JOB_COMPLETION_INDEX": "0", "SNACKLAB_SHARDS": "3"}, errHas: "disagree"},
		{name: "flag and CI total disagree", shards: 4, env: map[string]string{"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "3"}, errHas: "disagree on the number of shards"},
		{name: "total without index", env: map[string]string{"BUILDKITE_PARALLEL_JOB_COUNT": "3"}, errHas: "BUILDKITE_PARALLEL_JOB is not"},
		{name: "index without total", env: map[string]string{"CIRCLE_NODE_INDEX": "1"}, errHas: "CIRCLE_NODE_TOTAL is not"},
		{name: "two engines that disagree", env: map[string]string{"JOB_COMPLETION_INDEX": "0", "SNACKLAB_SHARDS": "2", "CIRCLE_NODE_INDEX": "1", "CIRCLE_NODE_TOTAL": "2"},
			errHas: "says shard 0/2 but CIRCLE_NODE_INDEX=1 and CIRCLE_NODE_TOTAL=2 says 1/2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, from, err := grade.AutoShard(c.shards, func(k string) string { return c.env[k] })
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("AutoShard(%d, %v): got %v, %v; want an error containing %q", c.shards, c.env, got, err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("AutoShard(%d, %v): %v", c.shards, c.env, err)
			}
			if got != c.want {
				t.Errorf("AutoShard(%d, %v) = %v, want %v", c.shards, c.env, got, c.want)
			}
			if !strings.Contains(from, c.from) {
				t.Errorf("AutoShard's description %q, want it to name %q", from, c.from)
			}
		})
	}
	if _, _, err := grade.AutoShard(2, func(string) string { return "" }); !errors.Is(err, grade.ErrNoShardEnv) {
		t.Errorf("nothing set: got %v, want ErrNoShardEnv", err)
	}
}

func TestExpandCohort(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bob", "alice", "star*"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := func(s ...string) []string {
		var out []string
		for _, x := range s {
			out = append(out, filepath.Join(dir, x))
		}
		return out
	}
	cases := []struct {
		name   string
		args   []string
		want   []string
		errHas string
	}{
		{name: "a pattern, sorted", args: j("*"), want: j("alice", "bob", "star*")},
		{name: "plain paths kept, missing ones too", args: j("bob", "carol"), want: j("bob", "carol")},
		{name: "an existing name with a star is not a pattern", args: j("star*"), want: j("star*")},
		{name: "a pattern matching nothing", args: j("z*"), errHas: "matches nothing"},
		{name: "a bad pattern", args: j("[a"), errHas: "syntax error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := grade.ExpandCohort(c.args)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("ExpandCohort(%q) = %q, %v; want an error containing %q", c.args, got, err, c.errHas)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("ExpandCohort(%q) = %q, %v; want %q", c.args, got, err, c.want)
			}
		})
	}
}
