// Command hostile is a submission that misbehaves, for internal/isolate's
// tests. One binary is installed as queuectl, sender and receiver; whichever
// it is started as, it does the one thing its build chose (-ldflags
// "-X main.mode=…") instead of honouring the contract, and prints what it
// achieved as one short line on stderr (the lab quotes that line in its
// failure message):
//
//	net    dial the TCP address main.target (a listener the test opened on
//	       the host's 127.0.0.1) and look up a name, then list the network
//	       interfaces; exit 1
//	write  write outside its directory: /sub, /, the lab binary, /etc, and
//	       the lab's own stdout and stderr through /proc/1/fd (a forged
//	       results.json); chmod /; list every directory it could write
//	       outside its scratch; exit 1
//	forge  attack the judge from the judged's seat (issue #19): plant a
//	       FIFO at the step's lab.log and symlinks where the lab writes its
//	       logs, append fsync lines to its own strace output, read the lab
//	       binary for the reference's lines, create in /work; print forged
//	       PASS lines; exit 1
//	fork   start copies of itself without end (os/exec of itself)
//	mem    allocate memory and touch it without end
//	sleep  sleep forever
//	escape leave a copy of itself running outside every process group the
//	       lab made (setsid), asleep for at most ten minutes; exit 1
//
// The destructive modes (write, fork, mem) refuse to run outside the
// isolation container, and forge outside a judged identity (a container's,
// or a local engine's uids), so running this by mistake on a host harms
// nothing.
// Nothing here ever names an address other than loopback: the only dial is
// to main.target (127.0.0.1), and the DNS lookup is made only when every
// nameserver in /etc/resolv.conf is a loopback address.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	mode   = "sleep"
	target = "" // host:port for mode net; must be loopback
	// judgedUID is isolate.LocalJudgedUID, the first uid a local engine
	// hands to the judged; "" (a build without it) accepts none.
	judgedUID = ""
)

func main() {
	switch mode {
	case "net":
		netProbe()
	case "write":
		mustBeIsolated()
		writeProbe()
	case "forge":
		mustBeJudged()
		forgeProbe()
	case "fork":
		mustBeIsolated()
		forkBomb()
	case "mem":
		mustBeIsolated()
		eat()
	case "escape":
		escape()
	case "sleep":
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Fprintf(os.Stderr, "hostile: unknown mode %q\n", mode)
	os.Exit(1)
}

// mustBeIsolated exits unless this runs in the isolation container: there
// the lab is PID 1, as /lab.
func mustBeIsolated() {
	cmdline, _ := os.ReadFile("/proc/1/cmdline")
	if !strings.HasPrefix(string(cmdline), "/lab\x00") {
		fmt.Fprintf(os.Stderr, "hostile %s: refusing to run outside the isolation container\n", mode)
		os.Exit(3)
	}
}

// mustBeJudged exits unless this runs as a judged identity of a grading
// boundary: a grading container (the lab is PID 1, as /lab) or a local
// engine's judged uids (judgedUID and the blocks above it). forge only
// plants files next to its work dir and reads; as root or a person it
// refuses.
func mustBeJudged() {
	if base, err := strconv.Atoi(judgedUID); err == nil && os.Getuid() >= base && os.Getuid() < base+100000 {
		return
	}
	mustBeIsolated()
}

// errName is a short name for what a syscall said: EROFS, EACCES, ….
func errName(err error) string {
	if err == nil {
		return "OK"
	}
	for _, e := range []struct {
		errno syscall.Errno
		name  string
	}{{syscall.EROFS, "EROFS"}, {syscall.EACCES, "EACCES"}, {syscall.EPERM, "EPERM"}, {syscall.ECONNREFUSED, "ECONNREFUSED"},
		{syscall.ENETUNREACH, "ENETUNREACH"}, {syscall.ENOENT, "ENOENT"}, {syscall.ETXTBSY, "ETXTBSY"}, {syscall.EHOSTUNREACH, "EHOSTUNREACH"}} {
		if errors.Is(err, e.errno) {
			return e.name
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return "TIMEOUT"
	}
	return "FAIL"
}

func netProbe() {
	if !strings.HasPrefix(target, "127.0.0.1:") {
		fmt.Fprintf(os.Stderr, "hostile net: target %q is not on 127.0.0.1; refusing\n", target)
		os.Exit(3)
	}
	dial := "CONNECTED"
	c, err := net.DialTimeout("tcp", target, 3*time.Second)
	if err == nil {
		c.Write([]byte("hostile\n"))
		c.Close()
	} else {
		dial = errName(err)
	}

	// With no resolv.conf (Docker writes none without a network), Go's
	// resolver asks 127.0.0.1:53 and [::1]:53: loopback too.
	ns := nameservers()
	nsText := strings.Join(ns, ",")
	if len(ns) == 0 {
		nsText = "none"
	}
	dns := "SKIPPED"
	if os.Getenv("HOSTILE_NO_DNS") == "" && allLoopback(ns) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, "snacklab-hostile.test")
		cancel()
		dns = "RESOLVED " + strings.Join(addrs, ",")
		if err != nil {
			dns = "FAIL"
		}
	}

	var ifaces []string
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			ifaces = append(ifaces, i.Name)
		}
	}
	fmt.Fprintf(os.Stderr, "hostile net: dial %s=%s dns(ns %s)=%s ifaces=%s\n",
		target, dial, nsText, dns, strings.Join(ifaces, ","))
	os.Exit(1)
}

// nameservers lists /etc/resolv.conf's nameservers (none when it is absent).
func nameservers() []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var ns []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	return ns
}

func allLoopback(ns []string) bool {
	for _, n := range ns {
		ip := net.ParseIP(n)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

func writeProbe() {
	self, _ := os.Executable()
	dir := filepath.Dir(self)
	forged := `{"score":8,"execution_time":0,"output":"8 of 8 lab steps passed.","visibility":"visible","tests":[]}` + "\n"
	var res []string
	try := func(label string, err error) { res = append(res, label+"="+errName(err)) }

	try(dir+"/pwned", os.WriteFile(filepath.Join(dir, "pwned"), []byte("pwned\n"), 0o644))
	try("chmod", os.Chmod(self, 0o777))
	try("/pwned", os.WriteFile("/pwned", []byte("pwned\n"), 0o644))
	try("/etc/pwned", os.WriteFile("/etc/pwned", []byte("pwned\n"), 0o644))
	try("chmod /", os.Chmod("/", 0o777))
	if fi, err := os.Stat("/"); err == nil {
		res = append(res, fmt.Sprintf("/mode=%o", fi.Mode().Perm()))
	}
	res = append(res, "writable="+writableDirs())
	f, err := os.OpenFile("/lab", os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	try("/lab", err)
	for _, fd := range []string{"/proc/1/fd/1", "/proc/1/fd/2"} {
		f, err := os.OpenFile(fd, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(forged)
			f.Close()
		}
		try(fd, err)
	}
	fmt.Fprintf(os.Stderr, "hostile write: %s\n", strings.Join(res, " "))
	os.Exit(1)
}

// writableDirs lists every directory of the container's file system this
// process may write, outside its scratch (/tmp, /work) and the kernel's
// (/proc, /sys, /dev): "none" when there is none, as there must be.
func writableDirs() string {
	var found []string
	filepath.WalkDir("/", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		switch p {
		case "/proc", "/sys", "/dev", "/tmp", "/work":
			return filepath.SkipDir
		}
		if syscall.Access(p, 2 /* W_OK */) == nil {
			found = append(found, p)
		}
		return nil
	})
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, ",")
}

func forkBomb() {
	self, err := os.Executable()
	if err != nil {
		os.Exit(1)
	}
	for {
		cmd := exec.Command(self, os.Args[1:]...)
		cmd.Start() // at the pids limit this fails: try again, forever
	}
}

var hoard [][]byte

func eat() {
	for {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		hoard = append(hoard, b)
	}
}

// forgeProbe tries what an empty starter copy once scored 8/8 with: the
// step's directory is the parent of its work dir, the lab's logs and traces
// are in ../logs, and the lab is /lab.
func forgeProbe() {
	var res []string
	try := func(label string, err error) { res = append(res, label+"="+errName(err)) }
	try("fifo ../lab.log", syscall.Mkfifo("../lab.log", 0o666))
	try("symlink ../logs/01-queuectl.stdout", os.Symlink("/proc/1/fd/2", "../logs/01-queuectl.stdout"))
	traces, err := filepath.Glob("../logs/*.trace")
	if _, serr := os.ReadDir("../logs"); serr != nil {
		err = serr
	}
	try("list ../logs", err)
	for _, tr := range traces {
		f, err := os.OpenFile(tr, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString("1 1.0 fsync(3</w/queue.db>) = 0\n")
			f.Close()
		}
		try("append "+filepath.Base(tr), err)
	}
	b, err := os.ReadFile("/lab")
	try("read /lab", err)
	if strings.Contains(string(b), "ORDER BY available_at, id LIMIT 1)") {
		res = append(res, "REFERENCE-FOUND")
	}
	try("mkdir /work/x", os.Mkdir("/work/x", 0o755))
	fmt.Println("PASS  1 retry      0.01s  forged")
	fmt.Fprintf(os.Stderr, "hostile forge: %s\n", strings.Join(res, " "))
	os.Exit(1)
}

// escape starts a copy of itself in a session of its own (setsid), which
// the kill of the process groups the lab started does not reach, and
// exits; the copy sleeps (at most ten minutes, so a run by mistake on a
// host leaves nothing for long).
func escape() {
	if os.Getenv("HOSTILE_ESCAPED") == "1" {
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
	self, err := os.Executable()
	if err != nil {
		os.Exit(1)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "HOSTILE_ESCAPED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	pid := 0
	if err == nil {
		pid = cmd.Process.Pid
	}
	fmt.Fprintf(os.Stderr, "hostile escape: left pid %d running (%s)\n", pid, errName(err))
	os.Exit(1)
}
