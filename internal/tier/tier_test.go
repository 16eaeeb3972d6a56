package tier_test

import (
	"testing"

	"snacklab/internal/tier"
)

func TestOnFollowsTheVariable(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want bool
	}{{"", false}, {"0", false}, {"yes", false}, {"1", true}} {
		t.Setenv(tier.Env, tc.val)
		if got := tier.On(); got != tc.want {
			t.Errorf("%s=%q: On() = %v, want %v", tier.Env, tc.val, got, tc.want)
		}
	}
}

func TestSlowSkipsUnlessOn(t *testing.T) {
	t.Setenv(tier.Env, "")
	ran := false
	t.Run("off", func(t *testing.T) {
		tier.Slow(t)
		ran = true
	})
	if ran {
		t.Error("tier.Slow did not skip with SNACKLAB_SLOW unset")
	}
	t.Setenv(tier.Env, "1")
	t.Run("on", func(t *testing.T) {
		tier.Slow(t)
		ran = true
	})
	if !ran {
		t.Error("tier.Slow skipped with SNACKLAB_SLOW=1")
	}
}
