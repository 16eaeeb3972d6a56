package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Value ranges of CONTRACT §1, kept here so the decoder, the fault checks and
// the tests agree on one set of numbers.
const (
	MaxIDLen = 64
	MinQty   = 1
	MaxQty   = 1000000
)

// Order is one delivery attempt as the sender posts it. Token is recorded with
// the first applied attempt only, so a later GET shows which grant landed.
type Order struct {
	ID    string `json:"id"`
	Qty   int64  `json:"qty"`
	Token int64  `json:"token"`
}

// DecodeOrder parses a POST /orders body strictly: one JSON object with exactly
// the keys id, qty and token (case-sensitive, no duplicates), qty and token
// plain integers. Strictness is the point: a lab receiver that guessed at
// a sloppy sender's meaning would hide the sender's bug.
//
// On a field error the returned Order still carries ID when the body was one
// well-formed object whose id was valid, so the caller can count the request
// against that id; on a structural error ID is empty.
func DecodeOrder(body []byte) (Order, error) {
	fields, err := objectFields(body)
	if err != nil {
		return Order{}, err
	}
	var o Order
	if raw, ok := fields["id"]; ok {
		if id, ok := validIDValue(raw); ok {
			o.ID = id
		}
	}
	for k := range fields {
		if k != "id" && k != "qty" && k != "token" {
			return o, fmt.Errorf("%w: unknown field %q", ErrMalformed, k)
		}
	}
	for _, k := range []string{"id", "qty", "token"} {
		if _, ok := fields[k]; !ok {
			return o, fmt.Errorf("%w: missing field %q", ErrMalformed, k)
		}
	}
	if o.ID == "" {
		return o, fmt.Errorf("%w: id must be a string of 1-%d ASCII letters, digits or ._:- starting with a letter or digit", ErrMalformed, MaxIDLen)
	}
	qty, ok := integer(fields["qty"])
	if !ok || qty < MinQty || qty > MaxQty {
		return o, fmt.Errorf("%w: qty must be an integer from %d to %d", ErrMalformed, MinQty, MaxQty)
	}
	token, ok := integer(fields["token"])
	if !ok || token < 0 {
		return o, fmt.Errorf("%w: token must be an integer >= 0", ErrMalformed)
	}
	o.Qty, o.Token = qty, token
	return o, nil
}

// objectFields walks the top-level object token by token instead of using
// DisallowUnknownFields, because encoding/json matches keys case-insensitively
// and lets the last of two duplicate keys win silently.
func objectFields(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: body is empty", ErrMalformed)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: body is not JSON: %v", ErrMalformed, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: body must be a JSON object", ErrMalformed)
	}
	fields := make(map[string]json.RawMessage, 3)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: body is not JSON: %v", ErrMalformed, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: body is not JSON", ErrMalformed)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: body is not JSON: %v", ErrMalformed, err)
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("%w: duplicate field %q", ErrMalformed, key)
		}
		fields[key] = bytes.TrimSpace(raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: body is not JSON: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: body must hold exactly one JSON object", ErrMalformed)
	}
	return fields, nil
}

// validIDValue reports the id held by a JSON value, if it is a string that
// is a valid order id.
func validIDValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || !ValidID(s) {
		return "", false
	}
	return s, true
}

// integer parses a JSON number written as a plain integer; 7.0, 7e0 and "7"
// are refused so that a sender's float or string bug shows up here.
func integer(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// ValidID reports whether s matches CONTRACT §1's order id rule,
// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$, without a regexp so that the hot path
// and the fault flags share one cheap check.
func ValidID(s string) bool {
	if len(s) < 1 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}
