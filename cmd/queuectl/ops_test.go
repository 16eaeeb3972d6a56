package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"snacklab/internal/ops/opstest"
	"snacklab/internal/testbin"
	"snacklab/queue"
)

// opsBuild is the queuectl binary built once by TestMain, so the tests see
// what an operator sees: real exit codes, real stdout and stderr.
func opsBuild(t *testing.T) string { return testbin.Path("queuectl") }

type opsResult struct {
	stdout, stderr string
	code           int
}

func opsRun(t *testing.T, bin string, args ...string) opsResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return opsResult{out.String(), errb.String(), code}
}

func opsRedrives(t *testing.T, path string) int64 {
	t.Helper()
	q, err := queue.Open(path, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	s, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Redrives
}

// TestOperatorVerbs runs every operator verb against the hand-built fixture.
// Figures are the fixture's, worked out by hand (see opstest).
func TestOperatorVerbs(t *testing.T) {
	bin := opsBuild(t)
	now := "--now-ms=100000"
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout; none means stdout must be empty
		line string   // the whole stderr when not ""
	}{
		{"stats json", []string{"stats", now, "--json"}, 0, []string{
			`"counts":{"dead":6,"done":2,"leased":2,"pending":4}`,
			`"dead_by_reason":{"deadline":1,"exhausted":3,"permanent":2}`,
			`"dead_ratio":{"deadline":0.16666666666666666,"exhausted":0.5,"permanent":0.3333333333333333}`,
			`"oldest_dead":{"id":"perm-1","reason":"permanent","attempts":1,"max_attempts":3,"token":1,"since_ms":2000,"age_ms":98000,"last_attempt":null,"investigation":null}`,
			`"last_investigation_at":21000,"last_investigation_age_ms":79000,"investigations":2`,
			`"redrives":6,"redriven":{"jobs":5,"done":1,"dead":1,"in_flight":3,"pending":2,"leased":1}`}, ""},
		{"stats table", []string{"stats", now}, 0, []string{"dead                       6\n",
			"exhausted                  3   0.500\n", "oldest dead:        perm-1 (permanent), dead for 1m38s",
			"redrives:           6, of 5 jobs: 1 done since, 1 dead again, 3 in flight"}, ""},
		{"stats prom", []string{"stats", now, "--prom"}, 0, []string{
			"# TYPE snacklab_queue_dead_jobs gauge\n", "snacklab_queue_dead_jobs{reason=\"exhausted\"} 3\n",
			"snacklab_queue_oldest_dead_age_seconds 98\n", "snacklab_queue_redrives_total 6\n",
			"snacklab_queue_redriven_jobs{result=\"in_flight\"} 3\n"}, ""},
		{"stats prom and json", []string{"stats", now, "--prom", "--json"}, 2, nil, "queuectl: stats: usage: --prom and --json exclude each other. Try: queuectl stats -h\n"},

		{"dead json", []string{"dead", now, "--json"}, 0, []string{
			`[{"id":"perm-1","reason":"permanent","attempts":1,"max_attempts":3,"token":1,"since_ms":2000,"age_ms":98000,"last_attempt":{"token":1,"attempt":1,"outcome":"permanent","status":null,"error":null,"at_ms":2000},"investigation":{"job_id":"perm-1","at_ms":20000,"note":"INC-7"}},{"id":"perm-2",`,
			`{"id":"rd-dead","reason":"exhausted","attempts":1,"max_attempts":1,"token":2,"since_ms":10000,"age_ms":90000,"last_attempt":{"token":2,"attempt":1,"outcome":"retry","status":null,"error":null,"at_ms":10000},"investigation":null}]` + "\n"}, ""},
		{"dead table", []string{"dead", now, "--reason", "permanent"}, 0, []string{
			"ID      REASON     ATTEMPTS  TOKEN  DEAD SINCE                AGE    LAST EVIDENCE   INVESTIGATION\n",
			"perm-1  permanent  1/3       1      1970-01-01T00:00:02.000Z  1m38s  #1 permanent -  INC-7\n",
			"perm-2  permanent  1/3       1      1970-01-01T00:00:03.000Z  1m37s  #1 permanent -  -\n"}, ""},
		{"dead limit", []string{"dead", now, "--json", "--limit", "1"}, 0, []string{`[{"id":"perm-1",`, `"investigation":{"job_id":"perm-1","at_ms":20000,"note":"INC-7"}}]` + "\n"}, ""},
		{"dead at the age boundary", []string{"dead", now, "--json", "--older-than", "98s"}, 0, []string{"[]\n"}, ""},
		{"dead 1ms under the boundary", []string{"dead", now, "--json", "--older-than", "97.999s"}, 0, []string{`[{"id":"perm-1",`}, ""},
		{"dead none match", []string{"dead", now, "--older-than", "2h"}, 0, []string{"no dead jobs match\n"}, ""},
		{"dead bad reason", []string{"dead", now, "--reason", "flaky"}, 3, nil, `queuectl: dead: invalid value: reason "flaky": want permanent, exhausted or deadline` + "\n"},
		{"dead negative age", []string{"dead", now, "--older-than", "-1s"}, 3, nil, ""},
		{"dead malformed age", []string{"dead", now, "--older-than", "soon"}, 2, nil, ""},

		{"alerts crossed", []string{"alerts", now, "--max-dead", "5", "--max-oldest-age", "90s", "--max-ratio", "exhausted=0.4"}, 22, []string{
			"ALERT max-dead: 6 dead > 5 (permanent=2 exhausted=3 deadline=1); ids: perm-1(permanent) perm-2(permanent) exh-1(exhausted) exh-2(exhausted) dl-1(deadline) rd-dead(exhausted)\n" +
				"ALERT max-oldest-age: oldest dead perm-1 (permanent) dead for 1m38s > 1m30s; ids: perm-1(permanent) perm-2(permanent) exh-1(exhausted) exh-2(exhausted) dl-1(deadline)\n" +
				"ALERT max-ratio exhausted: 0.500 > 0.4 (3 of 6 dead); ids: exh-1(exhausted) exh-2(exhausted) rd-dead(exhausted)\n"},
			"queuectl: alerts: 3 threshold(s) crossed\n"},
		{"alerts at the boundaries are quiet", []string{"alerts", now, "--max-dead", "6", "--max-oldest-age", "98s", "--max-ratio", "exhausted=0.5"}, 0, nil, ""},
		{"alerts json", []string{"alerts", now, "--json", "--max-dead", "5"}, 22, []string{`{"breaches":[{"check":"max_dead","value":6,"threshold":5,"ids":["perm-1","perm-2","exh-1","exh-2","dl-1","rd-dead"],"more_ids":0,`,
			`"message":"ALERT max-dead: 6 dead > 5 (permanent=2`, `"ok":false}`}, ""}, // > as is, not \u003e
		{"alerts json quiet", []string{"alerts", now, "--json", "--max-dead", "6"}, 0, []string{`{"breaches":[],"ok":true}` + "\n"}, ""},
		{"alerts without thresholds: any dead job", []string{"alerts", now}, 22, []string{"ALERT max-dead: 6 dead > 0 "}, "queuectl: alerts: 1 threshold(s) crossed\n"},
		{"alerts bad ratio", []string{"alerts", now, "--max-ratio", "exhausted=2"}, 3, nil, ""},
		{"alerts negative dead", []string{"alerts", now, "--max-dead", "-1"}, 3, nil, ""},

		{"redrive neither id nor reason", []string{"redrive", now, "--note", "INC-1"}, 2, nil, "queuectl: redrive: usage: --id or --reason is required. Try: queuectl redrive -h\n"},
		{"redrive both", []string{"redrive", now, "--note", "INC-1", "--id", "perm-1", "--reason", "permanent"}, 2, nil, ""},
		{"redrive id with rate", []string{"redrive", now, "--note", "INC-1", "--id", "perm-1", "--rate", "1/s"}, 2, nil, ""},
		{"redrive reason without rate", []string{"redrive", now, "--note", "INC-1", "--reason", "permanent"}, 2, nil, ""},
		{"redrive without note", []string{"redrive", now, "--reason", "permanent", "--rate", "1/s"}, 2, nil, ""},
		{"redrive bad rate", []string{"redrive", now, "--note", "INC-1", "--reason", "permanent", "--rate", "5"}, 3, nil, ""},
		{"redrive free-text note", []string{"redrive", now, "--note", "customer rang", "--reason", "permanent", "--rate", "1/s"}, 3, nil, ""},
		{"redrive bad reason", []string{"redrive", now, "--note", "INC-1", "--reason", "flaky", "--rate", "1/s"}, 3, nil, ""},
		{"redrive pending job", []string{"redrive", now, "--note", "INC-1", "--id", "pend-1"}, 9, nil, "queuectl: redrive: redrive pend-1: redrive refused: job is pending\n"},
		{"redrive dry run", []string{"redrive", now, "--note", "INC-1", "--reason", "exhausted", "--rate", "2/s", "--dry-run"}, 0, []string{
			"[1/3] exh-1 would redrive (exhausted, token 1)\n[2/3] exh-2 would redrive (exhausted, token 1)\n[3/3] rd-dead would redrive (exhausted, token 2)\n" +
				"dry run: would redrive 3 dead (exhausted) jobs under INC-1 at 2/s, taking at least 1s; nothing changed\n"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, path := opstest.Known(t)
			got := opsRun(t, bin, append([]string{c.args[0], "--db", path}, c.args[1:]...)...)
			if got.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got.code, c.code, got.stdout, got.stderr)
			}
			if len(c.want) == 0 && got.stdout != "" {
				t.Fatalf("stdout %q, want nothing", got.stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(got.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, got.stdout)
				}
			}
			switch {
			case c.line != "" && got.stderr != c.line:
				t.Errorf("stderr %q, want %q", got.stderr, c.line)
			case c.code == 0 && got.stderr != "":
				t.Errorf("stderr %q, want nothing", got.stderr)
			case c.code != 0 && (strings.Count(got.stderr, "\n") != 1 || !strings.HasPrefix(got.stderr, "queuectl: ")):
				t.Errorf("stderr %q, want one line queuectl: ...", got.stderr)
			}
			if strings.Contains(got.stdout+got.stderr, opstest.QtyMarker) || strings.Contains(got.stdout, "qty") && c.args[0] != "redrive" {
				t.Errorf("output carries order content:\n%s%s", got.stdout, got.stderr)
			}
			if got, want := opsRedrives(t, path), int64(opstest.Redrives); got != want {
				t.Errorf("redrives %d, want %d: nothing may be written", got, want)
			}
		})
	}
}

// TestRedriveSingleUnchanged: redrive --id keeps the output it had before
// the bulk mode existed, byte for byte.
func TestRedriveSingleUnchanged(t *testing.T) {
	bin := opsBuild(t)
	_, path := opstest.Known(t)
	got := opsRun(t, bin, "redrive", "--db", path, "--id", "perm-1", "--note", "INC-1", "--now-ms", "100000")
	if got.code != 0 || got.stdout != "perm-1 redriven (was permanent, token stays 1), note INC-1\n" || got.stderr != "" {
		t.Fatalf("got %+v", got)
	}
	got = opsRun(t, bin, "redrive", "--db", path, "--id", "perm-2", "--note", "INC-2", "--now-ms", "100000", "--json")
	var v struct {
		Job     queue.Job     `json:"job"`
		Redrive queue.Redrive `json:"redrive"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &v); err != nil || got.code != 0 {
		t.Fatalf("json %q: %v (exit %d)", got.stdout, err, got.code)
	}
	if want := (queue.Redrive{JobID: "perm-2", PrevToken: 1, PrevReason: queue.ReasonPermanent, AtMs: 100000, Note: "INC-2"}); v.Redrive != want || v.Job.State != queue.Pending {
		t.Fatalf("got %+v, %s; want %+v, pending", v.Redrive, v.Job.State, want)
	}
	if got, want := opsRedrives(t, path), int64(opstest.Redrives+2); got != want {
		t.Fatalf("redrives %d, want %d", got, want)
	}
	// investigate is unchanged too.
	got = opsRun(t, bin, "investigate", "--db", path, "--id", "perm-1", "--note", "INC-3")
	if got.code != 0 || got.stdout != "perm-1 investigated under INC-3\n" {
		t.Fatalf("investigate: %+v", got)
	}
}

func TestBulkRedriveOutputs(t *testing.T) {
	bin := opsBuild(t)
	_, path := opstest.Known(t)
	got := opsRun(t, bin, "redrive", "--db", path, "--reason", "exhausted", "--note", "INC-4", "--rate", "1000/s", "--limit", "2")
	if want := "[1/2] exh-1 redriven (was exhausted, token stays 1)\n[2/2] exh-2 redriven (was exhausted, token stays 1)\n" +
		"redrove 2 of 2 dead (exhausted) jobs under INC-4; skipped 0 no longer dead\n"; got.code != 0 || got.stdout != want {
		t.Fatalf("got exit %d\n%s\nwant\n%s", got.code, got.stdout, want)
	}
	got = opsRun(t, bin, "redrive", "--db", path, "--reason", "exhausted", "--note", "INC-4", "--rate", "1000/s", "--json")
	if want := `{"reason":"exhausted","note":"INC-4","dry_run":false,"candidates":1,"redriven":["rd-dead"],"skipped":[],"not_attempted":0,"interrupted":false}` + "\n"; got.code != 0 || got.stdout != want {
		t.Fatalf("got exit %d %q, want %q", got.code, got.stdout, want)
	}
}

// opsLines streams a process's stdout line by line.
func opsLines(r io.Reader) <-chan string {
	ch := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// TestBulkRedriveCtrlC interrupts a real process with SIGINT mid-way:
// it stops between jobs, says what it did, and the file agrees.
func TestBulkRedriveCtrlC(t *testing.T) {
	bin := opsBuild(t)
	q, path := opstest.NewFile(t)
	ids := opstest.DeadBatch(t, q, "job", 50, 1000)
	// 20/s: 50 jobs take at least 2.45 s, far longer than the signal takes.
	cmd := exec.Command(bin, "redrive", "--db", path, "--reason", "exhausted", "--note", "INC-5", "--rate", "20/s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := opsLines(stdout)
	var seen []string
	deadline := time.After(30 * time.Second)
	for len(seen) < 3 {
		select {
		case l, ok := <-out:
			if !ok {
				t.Fatalf("output ended early: %v %s", seen, stderr.String())
			}
			seen = append(seen, l)
		case <-deadline:
			t.Fatalf("no progress after 30s: %v", seen)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for l := range out {
		seen = append(seen, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v, stderr %s", err, stderr.String())
	}
	last := seen[len(seen)-1]
	progress := seen[:len(seen)-1]
	if !strings.Contains(last, "interrupted with") || !strings.HasPrefix(last, "redrove ") {
		t.Fatalf("summary %q: want it to say what was done and that it was interrupted", last)
	}
	redriven := map[string]bool{}
	for _, l := range progress {
		f := strings.Fields(l)
		if len(f) < 3 || f[2] != "redriven" {
			t.Fatalf("progress line %q", l)
		}
		redriven[f[1]] = true
	}
	if n := len(redriven); n < 3 || n == len(ids) {
		t.Fatalf("%d redriven: want an interruption mid-way", n)
	}
	for _, id := range ids {
		h, err := q.Show(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case redriven[id] && h.Job.State == queue.Pending && len(h.Redrives) == 1:
		case !redriven[id] && h.Job.State == queue.Dead && len(h.Redrives) == 0:
		default:
			t.Errorf("%s: state %s, %d audit rows, reported redriven %v", id, h.Job.State, len(h.Redrives), redriven[id])
		}
	}
	t.Logf("interrupted after %d of %d: %s", len(redriven), len(ids), last)

	// Re-running finishes the rest, writing nothing twice.
	got := opsRun(t, bin, "redrive", "--db", path, "--reason", "exhausted", "--note", "INC-5", "--rate", "1000/s", "--json")
	var res struct {
		Redriven []string `json:"redriven"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &res); err != nil || got.code != 0 {
		t.Fatalf("re-run: %+v", got)
	}
	if got, want := len(res.Redriven), len(ids)-len(redriven); got != want {
		t.Fatalf("re-run redrove %d, want %d", got, want)
	}
	if got, want := opsRedrives(t, path), int64(len(ids)); got != want {
		t.Fatalf("%d audit rows for %d jobs", got, want)
	}
}

// TestServeVerb starts the dashboard as an operator would and checks it is
// up, read-only, and stops on SIGINT.
func TestServeVerb(t *testing.T) {
	bin := opsBuild(t)
	_, path := opstest.Known(t)
	cmd := exec.Command(bin, "serve", "--db", path, "--now-ms", "100000", "--max-dead", "5")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var first string
	select {
	case first = <-opsLines(stdout):
	case <-time.After(30 * time.Second):
		t.Fatal("no output after 30s")
	}
	addr, ok := strings.CutPrefix(first, "listening on ")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("first line %q, want listening on 127.0.0.1:PORT", first)
	}
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/", 200, `id="count-dead">6<`},
		{"GET", "/", 200, `<li class="crossed" data-check="max_dead">max-dead: 6 dead &gt; 5`}, // --max-dead shown under Attention
		{"GET", "/metrics", 200, "snacklab_queue_jobs{state=\"dead\"} 6\n"},
		{"POST", "/", 405, ""},
		{"DELETE", "/metrics", 405, ""},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d, want %d with %q", c.method, c.path, resp.StatusCode, c.status, c.want)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exit after SIGINT: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve still running 30s after SIGINT")
	}
}
