package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Format names the JSON form of results written by Encode. A reader refuses
// any other, so a runner and a reader built from different versions of the
// lab say so instead of reading fields that mean something else.
const Format = "snacklab-results/1"

// ContractVersion is the version of CONTRACT.md the lab's steps grade. Only
// the newest version is graded (CONTRACT.md, "Versions"), so every report
// prints it: an implementation written to an earlier text learns why a
// later rule failed it (CONTRACT.md §7 lists those rules).
const ContractVersion = 2

// ContractText names the graded contract in reports: "CONTRACT.md version 2".
var ContractText = fmt.Sprintf("CONTRACT.md version %d", ContractVersion)

// file is the JSON form: the format, the contract version the results were
// graded against, and the results in step order.
type file struct {
	Format   string   `json:"format"`
	Contract int      `json:"contract"`
	Results  []Result `json:"results"`
}

// Encode writes results as one JSON document in the lab's result format.
func Encode(w io.Writer, results []Result) error {
	if results == nil {
		results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(file{Format: Format, Contract: ContractVersion, Results: results})
}

// Decode reads what Encode wrote: exactly one document of this format, with
// no field the format does not define, graded against this ContractVersion
// (a report would otherwise say the wrong version).
func Decode(r io.Reader) ([]Result, error) {
	dec := json.NewDecoder(r)
	rs, err := DecodeNext(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("decode results: more than one JSON document")
	}
	return rs, nil
}

// DecodeNext reads the next document from dec as Decode does, leaving what
// follows it (the isolated lab's stderr goes on after its results) to the
// caller.
func DecodeNext(dec *json.Decoder) ([]Result, error) {
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode results: %w", err)
	}
	if f.Format != Format {
		return nil, fmt.Errorf("decode results: format %q, want %q", f.Format, Format)
	}
	if f.Contract != ContractVersion {
		return nil, fmt.Errorf("decode results: graded against CONTRACT.md version %d, this lab grades version %d", f.Contract, ContractVersion)
	}
	if f.Results == nil {
		f.Results = []Result{}
	}
	return f.Results, nil
}
