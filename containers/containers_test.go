package containers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/containers"
	"snacklab/internal/tier"
)

// requireDocker is the environment switch that turns "no Docker engine" from
// a skip into a failure, so that CI proves these tests ran.
const requireDocker = "SNACKLAB_REQUIRE_DOCKER"

// pollEvery paces every readiness poll; each poll has its own deadline.
const pollEvery = 25 * time.Millisecond

// wait bounds any single wait for a container or a log line.
const wait = 60 * time.Second

const (
	orderID = "o-1"
	qty     = 7
	leaseMS = 1500
	crash   = 73
	queueDB = "/queue/queue.db"
)

// TestCrashAfterReceiptAcrossContainers is lab step 8 with every process in
// its own container: sender A exits 73 right after the receiver committed its
// order, sender B reclaims with token 2 once the lease has ended, the
// receiver counts two requests but adds stock once, and a late finish with
// token 1 is refused.
func TestCrashAfterReceiptAcrossContainers(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	l := newLab(t)
	rcv := l.startReceiver()

	l.mustExit(0, "queue-init", "queuectl", "init", "--db", queueDB, "--json")
	l.mustExit(0, "enqueue", "queuectl", "enqueue", "--db", queueDB, "--id", orderID, "--qty", fmt.Sprint(qty), "--json")

	// A: claim, POST, and exit 73 once the answer is read: no finish.
	a := l.mustExit(crash, "sender-a", "sender", "run-once", "--db", queueDB, "--url", rcv.inNet,
		"--owner", "sender-a", "--lease-ms", fmt.Sprint(leaseMS), "--exit-after-receipt", fmt.Sprint(crash), "--json")
	events := senderEvents(t, a.stdout)
	if got := kinds(events); got != "claiming claimed response" {
		t.Errorf("sender A's events: expected %q (no finish after the receipt), observed %q", "claiming claimed response", got)
	} else if tok := events[1]["token"]; tok != float64(1) {
		t.Errorf("sender A's claim: expected token 1, observed %v", tok)
	}

	// The receipt is committed: stock +7, one request; the job is still A's.
	st := rcv.stock(t)
	if st.Stock != qty || st.Requests[orderID] != 1 {
		t.Errorf("after A's crash: expected stock %d and 1 request, observed stock %d and %d requests", qty, st.Stock, st.Requests[orderID])
	}
	j := l.show()
	if j.State != "leased" || j.Token != 1 || j.Owner == nil || *j.Owner != "sender-a" {
		t.Errorf("after A's crash: expected the job leased by sender-a under token 1, observed %s token %d owner %v", j.State, j.Token, deref(j.Owner))
	}

	// The verifier compose uses must not be satisfied by this half-way state.
	bad := l.run("verify-early", verifyOutcome(rcv.inNet)...)
	if bad.code != 1 {
		t.Errorf("verify outcome before B: expected exit 1 (not satisfied), observed %d\n%s", bad.code, bad.stdout)
	}

	// The gate compose uses: A's request received, job leased under token
	// 1, and the real clock past the lease's end.
	l.mustExit(0, "lease-expiry", "verify", "wait-reclaimable", "--db", queueDB, "--id", orderID,
		"--token", "1", "--receiver", rcv.inNet, "--timeout-ms", fmt.Sprint(wait.Milliseconds()))

	// B: the same id again under token 2; the receiver answers duplicate.
	b := l.mustExit(0, "sender-b", "sender", "run-once", "--db", queueDB, "--url", rcv.inNet, "--owner", "sender-b", "--json")
	events = senderEvents(t, b.stdout)
	if got := kinds(events); got != "claiming claimed response finished" {
		t.Errorf("sender B's events: expected %q, observed %q", "claiming claimed response finished", got)
	} else if fin := events[3]; fin["token"] != float64(2) || fin["applied"] != true || fin["state"] != "done" {
		t.Errorf("sender B's finish: expected token 2 applied, state done; observed %v", fin)
	}

	st = rcv.stock(t)
	if st.Stock != qty || st.Orders != 1 || st.Requests[orderID] != 2 {
		t.Errorf("GET /stock: expected stock %d, 1 order, 2 requests for %s; observed %+v", qty, orderID, st)
	}
	if got := rcv.requestResults(t); got != "1:applied 2:duplicate" {
		t.Errorf("receiver's request log: expected %q (token:result), observed %q", "1:applied 2:duplicate", got)
	}

	j = l.show()
	if j.State != "done" || j.Token != 2 || j.Attempts != 2 || j.Reason != nil || j.Owner != nil {
		t.Errorf("job: expected done, token 2, 2 attempts, no reason, no owner; observed %+v", j)
	}

	// A's finish, arriving late with token 1, is refused and writes nothing.
	late := l.run("late-finish", "queuectl", "finish", "--db", queueDB, "--id", orderID, "--token", "1", "--outcome", "ok", "--json")
	var fin struct {
		Applied *bool `json:"applied"`
	}
	_ = json.Unmarshal(late.stdout, &fin)
	if late.code != 12 || fin.Applied == nil || *fin.Applied {
		t.Errorf("late finish with token 1: expected exit 12 and applied false, observed exit %d, %s", late.code, late.stdout)
	}

	// And the verifier compose uses agrees (it repeats the late finish and
	// checks that the job did not change).
	l.mustExit(0, "verify", verifyOutcome(rcv.inNet)...)
}

func verifyOutcome(receiverURL string) []string {
	return []string{"verify", "outcome", "--db", queueDB, "--id", orderID, "--qty", fmt.Sprint(qty),
		"--receiver", receiverURL, "--token", "2", "--stale-token", "1", "--requests", "2"}
}

// TestCheckStaticRefusesWhatScratchCannotRun needs no Docker: a script or a
// dynamically linked binary would fail inside the FROM scratch image, so the
// context builder refuses it with a reason.
func TestCheckStaticRefusesWhatScratchCannotRun(t *testing.T) {
	script := filepath.Join(t.TempDir(), "sender")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := containers.CheckStatic(script); err == nil || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("a shell script: expected refusal as not an ELF executable, observed %v", err)
	}
	for _, dyn := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(dyn); err != nil {
			continue
		}
		if err := containers.CheckStatic(dyn); err != nil && !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("%s: expected nil (static) or a dynamic-linking refusal, observed %v", dyn, err)
		}
	}
}

// lab is one run's Docker world: an image, a network and a queue volume,
// all labelled with the run's id and removed by t.Cleanup.
type lab struct {
	t         *testing.T
	ctx       context.Context
	pool      *dockertest.Pool
	id        string
	repo      string
	tag       string
	net       *dockertest.Network
	volume    string // the queue, shared by the senders and queuectl
	rcvVolume string // the receiver's database
	labels    map[string]string
	n         int // containers started, for unique names
}

func newLab(t *testing.T) *lab {
	t.Helper()
	pool := dockerPool(t)
	ctx := testContext(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, ctx: ctx, pool: pool, id: hex.EncodeToString(b[:]), repo: "snacklab"}
	l.tag = "test-" + l.id
	l.labels = map[string]string{"snacklab.test": l.id}

	// One image with all four binaries, built from static binaries made on
	// the host: nothing is pulled.
	dir := t.TempDir()
	start := time.Now()
	if err := containers.WriteContext(ctx, dir, containers.ContextOptions{}); err != nil {
		t.Fatalf("laying out the image context (building its binaries): %s", explain(ctx, start, err))
	}
	var out bytes.Buffer
	image := l.repo + ":" + l.tag
	t.Cleanup(func() {
		if err := pool.Client.RemoveImageExtended(image, dc.RemoveImageOptions{Force: true}); err != nil && !isNotFound(err) {
			t.Errorf("removing image %s: %v", image, err)
		}
	})
	if err := pool.Client.BuildImage(dc.BuildImageOptions{
		Name: image, ContextDir: dir, OutputStream: &out,
		RmTmpContainer: true, ForceRmTmpContainer: true, Context: ctx,
	}); err != nil {
		t.Fatalf("docker build %s: %s\n%s", image, explain(ctx, start, err), out.String())
	}
	t.Logf("built %s in %v (binaries on the host, FROM scratch)", image, time.Since(start).Round(time.Millisecond))

	netName := "snacklab-test-" + l.id
	n, err := pool.CreateNetwork(netName, func(o *dc.CreateNetworkOptions) { o.Labels = l.labels; o.Context = ctx })
	if err != nil {
		t.Fatalf("creating network %s: %v", netName, err)
	}
	l.net = n
	t.Cleanup(func() {
		if err := pool.Client.RemoveNetwork(n.Network.ID); err != nil && !isNotFound(err) {
			t.Errorf("removing network %s: %v", netName, err)
		}
	})

	// The senders share the queue volume; the receiver has its own.
	l.volume = l.createVolume("queue")
	l.rcvVolume = l.createVolume("receiver")
	return l
}

func (l *lab) createVolume(what string) string {
	l.t.Helper()
	name := "snacklab-test-" + l.id + "-" + what
	if _, err := l.pool.Client.CreateVolume(dc.CreateVolumeOptions{Name: name, Labels: l.labels, Context: l.ctx}); err != nil {
		l.t.Fatalf("creating volume %s: %v", name, err)
	}
	l.t.Cleanup(func() {
		if err := l.pool.Client.RemoveVolumeWithOptions(dc.RemoveVolumeOptions{Name: name, Force: true}); err != nil && !isNotFound(err) {
			l.t.Errorf("removing volume %s: %v", name, err)
		}
	})
	return name
}

// dockerPool connects to the engine, or skips — or fails when
// SNACKLAB_REQUIRE_DOCKER=1 says the tests must run.
func dockerPool(t *testing.T) *dockertest.Pool {
	t.Helper()
	pool, err := dockertest.NewPool("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = pool.Client.PingWithContext(ctx)
		cancel()
	}
	if err != nil {
		msg := fmt.Sprintf("no Docker engine reachable (%v), so the container tests did not run", err)
		if os.Getenv(requireDocker) == "1" {
			t.Fatalf("%s; %s=1 requires them", msg, requireDocker)
		}
		t.Skipf("%s; set %s=1 to make this a failure", msg, requireDocker)
	}
	return pool
}

func isNotFound(err error) bool {
	var e *dc.Error
	var nsc *dc.NoSuchContainer
	return errors.Is(err, dc.ErrNoSuchImage) || errors.Is(err, dc.ErrNoSuchVolume) || errors.As(err, &nsc) ||
		(errors.As(err, &e) && e.Status == http.StatusNotFound)
}

// container starts the image with cmd on the lab's network, labelled, not
// root, without capabilities, on a read-only root file system with the
// mounts given, publishing nothing unless bind says so. It is removed by
// t.Cleanup.
func (l *lab) container(name string, cmd, mounts []string, bind map[dc.Port][]dc.PortBinding) *dockertest.Resource {
	l.t.Helper()
	l.n++
	opts := &dockertest.RunOptions{
		Name:       fmt.Sprintf("snacklab-test-%s-%02d-%s", l.id, l.n, name),
		Repository: l.repo,
		Tag:        l.tag,
		Cmd:        cmd,
		Networks:   []*dockertest.Network{l.net},
		Labels:     l.labels,
		Mounts:     mounts,
	}
	for p := range bind {
		opts.ExposedPorts = append(opts.ExposedPorts, string(p))
	}
	opts.PortBindings = bind
	r, err := l.pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
		hc.PublishAllPorts = false // dockertest's default would publish on every interface
		hc.NetworkMode = l.net.Network.Name
		hc.AutoRemove = false // the exit code is read from the container itself
		hc.ReadonlyRootfs = true
		hc.Tmpfs = map[string]string{"/tmp": ""}
		hc.CapDrop = []string{"ALL"}
		hc.SecurityOpt = []string{"no-new-privileges:true"}
	})
	if err == nil {
		l.t.Cleanup(func() { l.remove(r) })
	} else {
		// Creation may have succeeded before start failed; find it by name.
		if c, ok := l.pool.ContainerByName(opts.Name); ok {
			l.t.Cleanup(func() { l.remove(c) })
		}
		l.t.Fatalf("docker run %s %v: %v", name, cmd, err)
	}
	return r
}

func (l *lab) remove(r *dockertest.Resource) {
	err := l.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: r.Container.ID, Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) {
		l.t.Errorf("removing container %s: %v", r.Container.Name, err)
	}
}

// result is what a one-shot container did, as Docker reports it.
type result struct {
	code           int // State.ExitCode from container inspect
	stdout, stderr []byte
}

// run starts a one-shot container, waits for it to exit, and reads its exit
// code from Docker's container inspect and its output from the logs.
func (l *lab) run(name string, cmd ...string) result {
	l.t.Helper()
	r := l.container(name, cmd, []string{l.volume + ":/queue"}, nil)
	ctx, cancel := context.WithTimeout(l.ctx, wait)
	defer cancel()
	if _, err := l.pool.Client.WaitContainerWithContext(r.Container.ID, ctx); err != nil {
		l.t.Fatalf("waiting for %s to exit: %v", name, err)
	}
	c, err := l.pool.Client.InspectContainerWithContext(r.Container.ID, ctx)
	if err != nil {
		l.t.Fatalf("inspecting %s: %v", name, err)
	}
	if c.State.Running {
		l.t.Fatalf("%s: Docker says it still runs after wait returned", name)
	}
	stdout, stderr := l.logs(ctx, r)
	l.t.Logf("%s %v → exit %d\n%s%s", name, cmd, c.State.ExitCode, stdout, stderr)
	l.remove(r) // done with it; t.Cleanup's second try finds nothing
	return result{code: c.State.ExitCode, stdout: stdout, stderr: stderr}
}

// mustExit is run that stops the test unless the exit code is want.
func (l *lab) mustExit(want int, name string, cmd ...string) result {
	l.t.Helper()
	res := l.run(name, cmd...)
	if res.code != want {
		l.t.Fatalf("%s: expected exit %d, observed %d (from container inspect)\nstdout: %s\nstderr: %s", name, want, res.code, res.stdout, res.stderr)
	}
	return res
}

func (l *lab) logs(ctx context.Context, r *dockertest.Resource) (stdout, stderr []byte) {
	var o, e bytes.Buffer
	err := l.pool.Client.Logs(dc.LogsOptions{Context: ctx, Container: r.Container.ID, OutputStream: &o, ErrorStream: &e, Stdout: true, Stderr: true})
	if err != nil {
		l.t.Fatalf("reading logs of %s: %v", r.Container.Name, err)
	}
	return o.Bytes(), e.Bytes()
}

// job is the part of CONTRACT §3's JOB these tests read.
type job struct {
	State    string  `json:"state"`
	Reason   *string `json:"reason"`
	Attempts int64   `json:"attempts"`
	Token    int64   `json:"token"`
	Owner    *string `json:"owner"`
}

// show reads the job through queuectl in a container on the shared volume.
func (l *lab) show() job {
	l.t.Helper()
	res := l.mustExit(0, "show", "queuectl", "show", "--db", queueDB, "--id", orderID, "--json")
	var v struct{ Job job }
	if err := json.Unmarshal(res.stdout, &v); err != nil {
		l.t.Fatalf("queuectl show: %v in %q", err, res.stdout)
	}
	return v.Job
}

// receiver is the receiver's container and its two addresses: inNet for
// the other containers, host for this test (127.0.0.1 only).
type receiver struct {
	l     *lab
	r     *dockertest.Resource
	inNet string
	host  string
}

func (l *lab) startReceiver() *receiver {
	l.t.Helper()
	r := l.container("receiver", []string{"receiver", "--db", "/data/receiver.db", "--addr", "0.0.0.0:8080"},
		[]string{l.rcvVolume + ":/data"}, map[dc.Port][]dc.PortBinding{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: ""}}})
	rc := &receiver{l: l, r: r, inNet: "http://" + strings.TrimPrefix(r.Container.Name, "/") + ":8080"}

	// Ready when it has said so (CONTRACT §5's handshake) ...
	ctx, cancel := context.WithTimeout(l.ctx, wait)
	defer cancel()
	var last []byte
	err := poll(ctx, func() (bool, error) {
		stdout, _ := l.logs(ctx, r)
		last = stdout
		if bytes.Contains(stdout, []byte("listening on ")) {
			return true, nil
		}
		c, err := l.pool.Client.InspectContainerWithContext(r.Container.ID, ctx)
		if err == nil && !c.State.Running {
			return false, fmt.Errorf("the receiver exited %d before listening", c.State.ExitCode)
		}
		return false, nil
	})
	if err != nil {
		_, stderr := l.logs(l.ctx, r)
		l.t.Fatalf("receiver readiness: %v\nstdout: %s\nstderr: %s", err, last, stderr)
	}
	// ... and when its published port answers on loopback.
	hostPort := r.GetHostPort("8080/tcp")
	if !strings.HasPrefix(hostPort, "127.0.0.1:") {
		l.t.Fatalf("receiver's published port: expected 127.0.0.1:PORT, observed %q", hostPort)
	}
	rc.host = "http://" + hostPort
	err = poll(ctx, func() (bool, error) {
		status, err := getJSON(ctx, rc.host+"/stock", nil)
		return err == nil && status == http.StatusOK, nil
	})
	if err != nil {
		l.t.Fatalf("receiver's GET /stock on %s: %v", rc.host, err)
	}
	return rc
}

type stock struct {
	Stock    int64            `json:"stock"`
	Orders   int64            `json:"orders"`
	Requests map[string]int64 `json:"requests"`
}

func (rc *receiver) stock(t *testing.T) stock {
	t.Helper()
	var s stock
	if status, err := getJSON(rc.l.ctx, rc.host+"/stock", &s); err != nil || status != http.StatusOK {
		t.Fatalf("GET /stock: status %d, %v", status, err)
	}
	return s
}

// requestResults is the receiver's request log for the order, as
// "token:result" pairs in the order they were logged.
func (rc *receiver) requestResults(t *testing.T) string {
	t.Helper()
	stdout, _ := rc.l.logs(rc.l.ctx, rc.r)
	var got []string
	for _, line := range strings.Split(string(stdout), "\n") {
		var ev struct {
			Event, ID, Result string
			Token             int64
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "request" && ev.ID == orderID {
			got = append(got, fmt.Sprintf("%d:%s", ev.Token, ev.Result))
		}
	}
	return strings.Join(got, " ")
}

func getJSON(ctx context.Context, url string, v any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v == nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// poll calls try every pollEvery until it is done, fails, or ctx ends.
func poll(ctx context.Context, try func() (bool, error)) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		done, err := try()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready before the deadline: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// senderEvents parses the sender's --json event lines.
func senderEvents(t *testing.T, stdout []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("sender event line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func kinds(evs []map[string]any) string {
	var k []string
	for _, e := range evs {
		k = append(k, fmt.Sprint(e["event"]))
	}
	return strings.Join(k, " ")
}

func deref(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}
