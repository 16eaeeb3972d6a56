package harness

// StraceUser is straceUser with the account files lookup reads.
func StraceUser(j *Judged, prog string, lookup func(uid string) (Account, error)) string {
	old := lookupAccount
	lookupAccount = lookup
	defer func() { lookupAccount = old }()
	return j.straceUser(prog)
}
