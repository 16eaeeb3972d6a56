package receiver_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"

	"snacklab/receiver"
)

// idRule is CONTRACT §1's order id rule, spelled as the contract spells it,
// to check the hand-written ValidID against.
var idRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)

// FuzzDecodeOrder checks that no body makes the decoder panic, that every
// accepted order satisfies the contract's rules and survives a round trip,
// and that a refused body still yields only a valid id.
func FuzzDecodeOrder(f *testing.F) {
	for _, seed := range []string{
		`{"id":"o-1","qty":7,"token":2}`,
		` {"token":0,"qty":1000000,"id":"A.b_c:d-e"} `,
		`{"id":"o-1","qty":7,"token":2}{}`,
		`{"id":"o-1","id":"o-2","qty":7,"token":2}`,
		`{"ID":"o-1","qty":7,"token":2}`,
		`{"id":"o-1","qty":7.0,"token":2}`,
		`{"id":"o-1","qty":"7","token":2}`,
		`{"id":"o-1","qty":-0,"token":-0}`,
		`{"id":"\u006f-1","qty":7,"token":9223372036854775807}`,
		`{"id":"o-1","qty":7,"token":9223372036854775808}`,
		`{"id":null,"qty":null,"token":null}`,
		`{"id":"o-1","qty":7,"token":2,"x":{"y":[1,2,{}]}}`,
		`[]`, `null`, ``, `{`, `"o-1"`, "{\"id\":\"o\xff\",\"qty\":1,\"token\":1}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := receiver.DecodeOrder(body)
		if o.ID != "" && !idRule.MatchString(o.ID) {
			t.Fatalf("DecodeOrder(%q) gave id %q, which breaks the id rule", body, o.ID)
		}
		if got, want := receiver.ValidID(o.ID), idRule.MatchString(o.ID); got != want {
			t.Fatalf("ValidID(%q)=%v, want %v", o.ID, got, want)
		}
		if err != nil {
			if !errors.Is(err, receiver.ErrMalformed) {
				t.Fatalf("DecodeOrder(%q) error %v is not ErrMalformed", body, err)
			}
			return
		}
		if o.ID == "" || o.Qty < receiver.MinQty || o.Qty > receiver.MaxQty || o.Token < 0 {
			t.Fatalf("DecodeOrder(%q) accepted %+v", body, o)
		}
		again, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", o, err)
		}
		back, err := receiver.DecodeOrder(again)
		if err != nil || back != o {
			t.Fatalf("round trip of %+v gave %+v, %v", o, back, err)
		}
	})
}

// FuzzValidID checks the hand-written id check against the contract's regexp.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"o-1", "", "-a", "a-", "A:b.c_d", "a b", "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := receiver.ValidID(s), idRule.MatchString(s); got != want {
			t.Fatalf("ValidID(%q)=%v, want %v", s, got, want)
		}
	})
}
