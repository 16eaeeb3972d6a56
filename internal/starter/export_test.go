package starter

import "context"

// Judge is judge, for the external tests.
var Judge = judge

// ProgramsBuiltFrom lists the programs of the contract built from any of
// files in the module at module.
func ProgramsBuiltFrom(module string, files ...string) ([]string, error) {
	pf, err := listProgramFiles(context.Background(), module)
	if err != nil {
		return nil, err
	}
	return pf.touchedBy(files), nil
}
