package crash

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"snacklab/labsteps/harness"
)

// world is one crash story's directory and processes: the queue file, the
// receiver's file, and what every process printed. It judges nothing; the
// checker reads what it recorded.
type world struct {
	ctx  context.Context
	bin  string
	dir  string // data: the two SQLite files and nothing else
	logs string
	cwd  string // the programs' working dir
	// judged is the identity the programs run as; nil: the lab's own.
	judged *harness.Judged
	q, r   string // queue and receiver files
	n      int    // processes started, for log names

	mu     sync.Mutex
	grants []grant // every (id, token) a claim reported, in the order seen
	recv   *receiver
	// accepted maps an order id to its qty once an enqueue said so.
	accepted map[string]int64
	// redrives counts, per id, redrives that exited 0 and redrives that
	// were killed (which may or may not have committed).
	redriveOK, redriveKilled map[string]int
	procs                    int
}

type grant struct {
	ID    string
	Token int64
	By    string
	At    int64 // the injected clock of the process that was granted it
}

// newWorld makes dir's layout. With a judged identity it is lab run's
// (harness.MakeStepDirs): dir is the judge's and 0711, the programs reach
// data (the two SQLite files) and cwd (their working dir), both theirs, but
// cannot list or write dir, nor reach logs (0700: what they printed, the
// lab's evidence). Without one, data and logs are plain dirs and the
// programs run in logs, as they always have.
func newWorld(ctx context.Context, bin, dir string, j *harness.Judged) (*world, error) {
	w := &world{ctx: ctx, bin: bin, dir: filepath.Join(dir, "data"), logs: filepath.Join(dir, "logs"), judged: j,
		accepted: map[string]int64{}, redriveOK: map[string]int{}, redriveKilled: map[string]int{}}
	w.q, w.r = filepath.Join(w.dir, "q.db"), filepath.Join(w.dir, "r.db")
	w.cwd = w.logs
	if j == nil {
		for _, d := range []string{w.dir, w.logs} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		return w, nil
	}
	// Worlds follow one another as one identity: a program of the world
	// before that left its process group (setsid) outlived its group's
	// kill, and is ended before this world's files exist.
	if err := j.KillAll(); err != nil {
		return nil, fmt.Errorf("crash: end the judged's processes of the world before: %w", err)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	scratch, logs, err := harness.MakeStepDirs(dir, j)
	if err != nil {
		return nil, fmt.Errorf("crash: the judged's dirs: %w", err)
	}
	w.logs, w.cwd = logs, scratch
	if err := os.Mkdir(w.dir, 0o700); err != nil {
		return nil, err
	}
	if err := j.Own(w.dir); err != nil {
		return nil, fmt.Errorf("crash: hand the data dir to uid %d: %w", j.UID, err)
	}
	return w, nil
}

// command is how every program under test starts but the traced one: in
// its own process group, in the programs' working dir, without the lab's
// own switches in its environment, and as the judged when there is one.
func (w *world) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(w.bin, prog), args...)
	cmd.Dir = w.cwd
	cmd.SysProcAttr = w.judged.ProcAttr()
	cmd.Env = w.judged.Env()
	return cmd
}

// result is a process that ended.
type result struct {
	Argv   []string
	Code   int // -1: killed
	Signal string
	Stdout string
	Stderr string
	// StdoutFile is the file the traced program's stdout went to, as its
	// trace names it (symlinks resolved): its answers are the writes to
	// it, by any process of the tree, not every write to a descriptor 1.
	StdoutFile string
}

func (r result) lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(r.Stdout, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (r result) String() string {
	s := strings.Join(r.Argv, " ")
	if r.Signal != "" {
		return s + " (killed by " + r.Signal + ")"
	}
	return fmt.Sprintf("%s (exit %d)", s, r.Code)
}

func (w *world) logPair(name string) (stdout, stderr *os.File, err error) {
	w.mu.Lock()
	w.n++
	base := filepath.Join(w.logs, fmt.Sprintf("%03d-%s", w.n, name))
	w.procs++
	w.mu.Unlock()
	if stdout, err = os.Create(base + ".stdout"); err != nil {
		return nil, nil, err
	}
	if stderr, err = os.Create(base + ".stderr"); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// run runs prog to its end (a time limit kills it) and records what it
// reported: grants, acceptances, redrives.
func (w *world) run(prog string, args ...string) result {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	cmd := w.command(ctx, prog, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return w.ended(prog, args, &stdout, &stderr, cmd.ProcessState, err)
}

// ended counts a finished process and records what it reported.
func (w *world) ended(prog string, args []string, stdout, stderr *bytes.Buffer, ps *os.ProcessState, err error) result {
	w.mu.Lock()
	w.procs++
	w.mu.Unlock()
	res := result{Argv: append([]string{prog}, args...), Stdout: stdout.String(), Stderr: stderr.String()}
	res.Code, res.Signal = status(ps, err)
	w.note(res)
	return res
}

func status(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return -1, "never started: " + fmt.Sprint(err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if ws.Signal() == syscall.SIGKILL {
			return -1, "SIGKILL"
		}
		return -1, ws.Signal().String()
	}
	return ps.ExitCode(), ""
}

// note records what a process reported, whatever became of it after.
func (w *world) note(r result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	verb := ""
	if len(r.Argv) > 1 {
		verb = r.Argv[1]
	}
	at, _ := strconv.ParseInt(flagValue(r.Argv, "--now-ms"), 10, 64)
	for _, l := range r.lines() {
		switch {
		case l["event"] == "claimed":
			w.grants = append(w.grants, grant{str(l["id"]), num(l["token"]), flagValue(r.Argv, "--owner"), at})
		case r.Argv[0] == "queuectl" && verb == "claim" && l["claimed"] == true:
			job, _ := l["job"].(map[string]any)
			w.grants = append(w.grants, grant{str(job["id"]), num(job["token"]), "queuectl claim", at})
		case r.Argv[0] == "queuectl" && verb == "enqueue":
			if job, ok := l["job"].(map[string]any); ok {
				w.accepted[str(job["id"])] = num(job["qty"])
			}
		}
	}
	if r.Argv[0] == "queuectl" && verb == "redrive" {
		id := flagValue(r.Argv, "--id")
		switch {
		case r.Code == 0:
			w.redriveOK[id]++
		case r.Signal != "":
			w.redriveKilled[id]++
		}
	}
}

func flagValue(argv []string, name string) string {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func ms(n int64) string { return strconv.FormatInt(n, 10) }

// queuectl runs a queuectl verb on the queue file with --json.
func (w *world) queuectl(verb string, now int64, args ...string) result {
	a := append([]string{verb, "--db", w.q, "--json", "--now-ms", ms(now)}, args...)
	return w.run("queuectl", a...)
}

// ---- the receiver ----

type receiver struct {
	cmd  *exec.Cmd
	URL  string
	done chan struct{}
	res  result
}

// startReceiver starts a receiver on the receiver file and waits for its
// "listening on" line (or its death, which returns an error).
func (w *world) startReceiver() (*receiver, error) {
	out, errf, err := w.logPair("receiver")
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// Not ended with ctx: the receiver is killed, or stopped, by the story.
	cmd := w.command(context.Background(), "receiver", "--db", w.r, "--addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = pw, errf
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close()
	rc := &receiver{cmd: cmd, done: make(chan struct{})}
	url := make(chan string, 1)
	go func() {
		defer out.Close()
		br := bufio.NewReader(pr)
		first, err := br.ReadString('\n')
		out.WriteString(first)
		addr, ok := strings.CutPrefix(strings.TrimSpace(first), "listening on ")
		if ok && err == nil {
			url <- "http://" + addr
		}
		close(url)
		io.Copy(out, br)
		pr.Close()
	}()
	go func() {
		err := cmd.Wait()
		errf.Close()
		rc.res = result{Argv: []string{"receiver", "--db", w.r}}
		rc.res.Code, rc.res.Signal = status(cmd.ProcessState, err)
		close(rc.done)
	}()
	select {
	case u, ok := <-url:
		if !ok {
			<-rc.done
			return nil, fmt.Errorf("the receiver ended before announcing its address: %s", rc.res)
		}
		rc.URL = u
	case <-time.After(30 * time.Second):
		rc.kill()
		return nil, errors.New("the receiver did not announce `listening on` within 30 s")
	}
	w.mu.Lock()
	w.recv = rc
	w.mu.Unlock()
	return rc, nil
}

func (r *receiver) kill() {
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

// stop ends the receiver gracefully (SIGTERM), killing it after 10 s.
func (r *receiver) stop() {
	syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.kill()
	}
}

func (r *receiver) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// get asks the receiver GET path and decodes its JSON; found is false on 404.
func getJSON(url, path string, v any) (found bool, err error) {
	// A connection per request: a receiver may close an idle one after a
	// second (CONTRACT §5.bounds).
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url + path)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return true, json.Unmarshal(b, v)
}
