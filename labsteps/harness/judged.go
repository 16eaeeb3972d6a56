package harness

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"snacklab/labsteps/fresh"
)

// Judged is the identity the programs under test run as, when it is not
// the lab's own (issue #19, docs/isolation.md): a grading container runs
// the lab as the judge and every program it starts as this uid and gid, so
// that nothing the lab reads as evidence (logs, traces, its story) or
// writes as output can be written by the judged. Changing identity needs
// CAP_SETUID and CAP_SETGID, and ending the judged's processes CAP_KILL; the
// scratch directory is handed over with CAP_CHOWN.
type Judged struct {
	UID, GID uint32
	// Exec is the command that becomes the judged identity and then execs
	// its arguments ("/lab judged-exec"): strace runs it, so that strace
	// stays the judge's (a tracer of the judged's own uid could be written
	// to by the traced) while what it traces is the judged's, wherever
	// strace's own -u cannot (it needs a name: Accounts), and lab crash's
	// tracer always. Empty: strace is not started that way (its steps
	// fail saying so).
	Exec []string
	// Accounts says this system's /etc/passwd and /etc/group are the
	// grading image's (Accounts): each step's identity has a name there,
	// with no group but its own, so strace can run a traced program as it
	// (-u) with no judged-exec step in between. Set only inside the
	// grading container: a host's account files (or its NSS) may give a
	// uid groups of its own.
	Accounts bool
}

// JudgedExecCommand is the lab's hidden subcommand that drops to a judged
// identity and execs a program: lab judged-exec UID GID -- PROG ARGS...
const JudgedExecCommand = "judged-exec"

// isolatedEnv is the lab's own switch (cmd/lab/isolated_linux.go): the
// programs it grades must not inherit it.
const isolatedEnv = "SNACKLAB_ISOLATED"

// ProcAttr is how every program under test starts: its own process group,
// as the judged when there is one.
func (j *Judged) ProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if j != nil {
		a.Credential = &syscall.Credential{Uid: j.UID, Gid: j.GID, Groups: []uint32{}}
	}
	return a
}

// Env is the environment of a program under test: the lab's, without its
// own switches.
func (j *Judged) Env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, isolatedEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Accounts is /etc/passwd and /etc/group for a grading image whose lab
// runs with --judged-uid uid --judged-gid gid: an account for each step's
// identity (ForStep), named judged-stepN, in no group but its own. strace
// -u needs a name; the lab checks the name still maps to exactly the
// identity before using it (straceUser).
func Accounts(uid, gid uint32) (passwd, group []byte) {
	p := []string{"root:x:0:0:root:/:/nonexistent"}
	g := []string{"root:x:0:"}
	for n := 1; n <= stepIDs; n++ {
		name := fmt.Sprintf("judged-step%d", n)
		p = append(p, fmt.Sprintf("%s:x:%d:%d:%s:/nonexistent:/nonexistent", name, uid+uint32(n), gid+uint32(n), name))
		g = append(g, fmt.Sprintf("%s:x:%d:", name, gid+uint32(n)))
	}
	return []byte(strings.Join(p, "\n") + "\n"), []byte(strings.Join(g, "\n") + "\n")
}

// straceUser is the account strace runs prog as (-u): j's name in this
// system's account files when they are the grading image's and the name
// maps back to exactly j (its uid, its gid, no other group); "" otherwise,
// and a traced start then goes through the judged-exec step (TracedArgv).
// Skipping that step saves a start of the lab under ptrace for every
// traced program (about 14 ms each in a 1-CPU container, 48 a run:
// docs/grading.md). A set-user-ID or set-group-ID prog is never run by
// name: strace -u would give it its owner's rights itself, where the
// kernel, under no_new_privs, ignores the bits.
func (j *Judged) straceUser(prog string) string {
	if j == nil || !j.Accounts {
		return ""
	}
	if fi, err := os.Stat(prog); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		return ""
	}
	uid, gid := strconv.FormatUint(uint64(j.UID), 10), strconv.FormatUint(uint64(j.GID), 10)
	a, err := lookupAccount(uid)
	if err != nil || a.UID != uid || a.GID != gid || len(a.Groups) != 1 || a.Groups[0] != gid || a.Back != uid {
		return ""
	}
	return a.Name
}

// Account is what a system's account files say of a uid: its name, its
// primary gid, every group it is in, and the uid its name maps back to.
type Account struct {
	Name, UID, GID string
	Groups         []string
	Back           string
}

// lookupAccount reads this system's account files (a variable: the tests
// give it others).
var lookupAccount = func(uid string) (Account, error) {
	u, err := user.LookupId(uid)
	if err != nil {
		return Account{}, err
	}
	gs, err := u.GroupIds()
	if err != nil {
		return Account{}, err
	}
	back, err := user.Lookup(u.Username)
	if err != nil {
		return Account{}, err
	}
	return Account{Name: u.Username, UID: u.Uid, GID: u.Gid, Groups: gs, Back: back.Uid}, nil
}

// TracedArgv is the argv strace (or lab crash's tracer) runs: the program itself, or the judged
// exec step in front of it.
func (j *Judged) TracedArgv(prog string) ([]string, error) {
	if j == nil {
		return []string{prog}, nil
	}
	if len(j.Exec) == 0 {
		return nil, fmt.Errorf("no judged-exec command to start a traced program as uid %d", j.UID)
	}
	return append(append([]string(nil), j.Exec...), strconv.FormatUint(uint64(j.UID), 10), strconv.FormatUint(uint64(j.GID), 10), "--", prog), nil
}

// Own hands path to the judged (without following a symlink): the scratch
// directory, and files the lab makes there for the programs to use.
func (j *Judged) Own(path string) error {
	if j == nil {
		return nil
	}
	return os.Lchown(path, int(j.UID), int(j.GID))
}

// MakeStepDirs lays out a step's directory root (made by the caller, the
// judge's): root/scratch, the judged's work dir (queue files, receiver
// files), and root/logs, the judge's alone (mode 0700: process logs,
// traces). With a judged identity root becomes 0711, so the judged can
// reach scratch through it but can neither list nor write it.
func MakeStepDirs(root string, j *Judged) (scratch, logs string, err error) {
	scratch, logs = filepath.Join(root, "scratch"), filepath.Join(root, "logs")
	if err := fresh.Mkdir(logs, 0o700); err != nil {
		return "", "", err
	}
	if err := fresh.Mkdir(scratch, 0o700); err != nil {
		return "", "", err
	}
	if j != nil {
		if err := j.Own(scratch); err != nil {
			return "", "", fmt.Errorf("hand the scratch dir to uid %d: %w", j.UID, err)
		}
		if err := os.Chmod(root, 0o711); err != nil {
			return "", "", err
		}
	}
	return scratch, logs, nil
}

// JudgedExec is the judged-exec subcommand: args are UID GID -- PROG ARGS...;
// it sets the supplementary groups, gid and uid, then execs PROG. It
// returns only on failure.
func JudgedExec(args []string) error {
	if len(args) < 4 || args[2] != "--" {
		return fmt.Errorf("usage: lab %s UID GID -- PROG [ARGS...]", JudgedExecCommand)
	}
	prog, err := exec.LookPath(args[3])
	if err != nil {
		return err
	}
	if err := become(JudgedExecCommand, args[0], args[1]); err != nil {
		return err
	}
	return syscall.Exec(prog, args[3:], (*Judged)(nil).Env())
}

// become drops this process, every thread of it, to the judged identity
// named by the numeric uid and gid (never root), with no supplementary
// groups, for the helper cmd (judged-exec, judged-sql).
func become(cmd, uidArg, gidArg string) error {
	uid, err1 := strconv.ParseUint(uidArg, 10, 32)
	gid, err2 := strconv.ParseUint(gidArg, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return fmt.Errorf("%s: want a non-zero numeric UID and a numeric GID, got %q %q", cmd, uidArg, gidArg)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(int(gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(int(uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	if os.Geteuid() != int(uid) || os.Getegid() != int(gid) {
		return fmt.Errorf("%s: uid %d gid %d after setuid %d setgid %d", cmd, os.Geteuid(), os.Getegid(), uid, gid)
	}
	return nil
}

// WriteScratch writes data as a new file at path in the work dir, for the
// programs under test to use: whatever was at path (the programs' own
// file, or a link one of them planted) is removed first, never written
// through, and the new file is handed to the judged.
func (h *Harness) WriteScratch(path string, data []byte) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := fresh.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	return h.Judged.Own(path)
}
