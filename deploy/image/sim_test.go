package image_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"snacklab/internal/starter"
	"snacklab/internal/tier"
	"snacklab/labsteps/mutants"
)

// requireDocker is CI's switch (.ci/run). The simulation builds the grading
// image (Go toolchain, module cache: minutes the first time), so unlike the
// other Docker suites it does not run by default even where an engine
// answers: it runs only when this is set, and then a missing engine fails.
const requireDocker = "SNACKLAB_REQUIRE_DOCKER"

// speedupEnv asks for the speed-up figures: the cohort graded as 1, 2, 3
// and 4 parallel shards (four more gradings of the cohort).
const speedupEnv = "SNACKLAB_SHARD_SPEEDUP"

// simMutants are the wrong answers in the simulated cohort.
var simMutants = []string{"finish-ignores-token", "receiver-no-dedup"}

// simPoints keeps the simulation to about a minute on a loaded 2-core
// machine: the steps that exercise claim, finish and the crash story, where
// the mutants above fail and the starter fails throughout.
const simPoints = "1=10,3=10,4=10,8=10"

// TestIndexedJobOnDocker plays deploy/kubernetes/grade.yaml on the Docker
// engine: the image build.sh makes, one container per shard given its own
// JOB_COMPLETION_INDEX and the args of the manifest (with $(VAR) expanded
// as the kubelet does), its mounts, user, capabilities and environment, the
// cohort read-only, no network, a read-only root and a /tmp of its own; then
// lab merge in the same image.
// The merged grades equal an unsharded grading of the cohort byte for byte
// once the timings are blanked (see normalize), and a shard killed midway
// and graded again changes nothing.
func TestIndexedJobOnDocker(t *testing.T) {
	tier.Slow(t)
	if os.Getenv(requireDocker) == "" {
		t.Skipf("the Kubernetes simulation builds the grading image; it runs when %s=1 (CI sets it)", requireDocker)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("%s is set but there is no docker command: %v", requireDocker, err)
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("%s is set but no Docker engine answers: %v\n%s", requireDocker, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	s := &sim{t: t, ctx: ctx, id: randomID(t), points: simPoints}
	s.image = "snacklab-grade:sim-" + s.id

	t0 := time.Now()
	var eg errgroup.Group
	eg.Go(func() error { return s.buildImage(root) })
	eg.Go(func() error { return s.buildCohort(root) })
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", s.image).Run() })
	t.Logf("image and cohort of %d ready in %.1fs", len(s.cohort), time.Since(t0).Seconds())
	s.args = manifestArgs(t, filepath.Join(root, "deploy", "kubernetes", "grade.yaml"), "grade")
	s.mergeArgs = manifestArgs(t, filepath.Join(root, "deploy", "kubernetes", "merge.yaml"), "merge")
	s.pods = map[string]pod{"grade": manifestPod(t, filepath.Join(root, "deploy", "kubernetes", "grade.yaml")),
		"merge": manifestPod(t, filepath.Join(root, "deploy", "kubernetes", "merge.yaml"))}
	s.results = t.TempDir()
	if err := os.Chmod(s.results, 0o777); err != nil { // written by the pod's user
		t.Fatal(err)
	}

	// The reference: the whole cohort in one container, no shard.
	all := s.grade(t, "all", -1, 0)
	checkScores(t, s.results, "all", s.cohort)

	// Three shards at once, then the merge.
	const n = 3
	took := s.shards(t, "three", n)
	t.Logf("1 container: %.1fs; %d shards in parallel: %.1fs (speed-up %.2f on %d cores)",
		all.Seconds(), n, took.Seconds(), all.Seconds()/took.Seconds(), cores(t))
	s.merge(t, "three", n)
	compare(t, filepath.Join(s.results, "all"), filepath.Join(s.results, "three", "merged"))
	first := filepath.Join(s.results, "three", "merged-first")
	if err := os.Rename(filepath.Join(s.results, "three", "merged"), first); err != nil {
		t.Fatal(err)
	}

	// Kill shard 1 once it has graded a submission, grade it again, merge
	// again: the same grades.
	s.killMidway(t, "three", 1, n)
	if r := s.run(t, "merge-killed", -1, "three", "merge", "--out", "/results/merged-killed", "/results/shard-*"); r.code != 2 {
		t.Errorf("merge with shard 1 killed midway: got exit %d\n%s\nwant exit 2 (an interrupted shard is refused, never merged)", r.code, r.out)
	} else {
		t.Logf("merge with shard 1 killed midway refused: %s", strings.TrimSpace(r.out))
	}
	s.grade(t, "three", 1, n)
	s.merge(t, "three", n)
	compare(t, first, filepath.Join(s.results, "three", "merged"))

	// lab merge refuses a missing shard and a duplicate one.
	missing := s.run(t, "merge-missing", -1, "three", "merge", "--out", "/results/merged-missing", "/results/shard-0", "/results/shard-2")
	if missing.code != 2 || !strings.Contains(missing.out, "missing shards: 1") {
		t.Errorf("merge without shard 1: got exit %d\n%s\nwant exit 2 naming the missing shard 1", missing.code, missing.out)
	}
	dupDir := filepath.Join(s.results, "three", "copy-of-shard-1")
	copyTree(t, filepath.Join(s.results, "three", "shard-1"), dupDir)
	dup := s.run(t, "merge-dup", -1, "three", "merge", "--out", "/results/merged-dup", "/results/shard-*", "/results/copy-of-shard-1")
	if dup.code != 2 || !strings.Contains(dup.out, "overlapping shards") {
		t.Errorf("merge with shard 1 twice: got exit %d\n%s\nwant exit 2 saying overlapping shards", dup.code, dup.out)
	}

	if os.Getenv(speedupEnv) != "" {
		// Every step, so that grading outweighs starting containers; first
		// as the manifest grades (a submission's steps at once), then with
		// --parallel 1 (one step at a time: a pod of one core).
		s.points = ""
		for _, par := range []string{"", "1"} {
			s.parallel = par
			var one time.Duration
			for _, k := range []int{1, 2, 3, 4} {
				d := s.shards(t, fmt.Sprintf("speed-%s-%d", par, k), k)
				if k == 1 {
					one = d
				}
				t.Logf("speed-up, all 8 steps, --parallel %q: %d parallel shard(s): %.1fs, %.2f × one shard's %.1fs (%d cores)",
					par, k, d.Seconds(), one.Seconds()/d.Seconds(), one.Seconds(), cores(t))
			}
		}
	}
}

type sim struct {
	t         *testing.T
	ctx       context.Context
	id        string
	image     string
	cohort    map[string]string // name → "ref", "starter" or "mutant"
	dir       string            // the cohort, mounted where grade.yaml says
	results   string            // the results volume
	args      []string          // the grading container's args in grade.yaml
	mergeArgs []string          // the merge container's args in merge.yaml
	pods      map[string]pod    // grade.yaml's and merge.yaml's pods
	points    string            // --points added to them; "" is every step
	parallel  string            // --parallel added to them, when set
	seq       int
}

func randomID(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func moduleRoot(t *testing.T) string {
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func cores(t *testing.T) int {
	out, err := exec.Command("nproc").Output()
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n == 0 {
		return -1
	}
	return n
}

func (s *sim) buildImage(root string) error {
	cmd := exec.CommandContext(s.ctx, filepath.Join(root, "deploy", "image", "build.sh"), s.image)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("deploy/image/build.sh %s: %v\n%s", s.image, err, out)
	}
	return nil
}

// buildCohort makes bin dirs on the host (the grader takes them as they
// are, so no container compiles SQLite): three copies of the reference, the
// starter and simMutants.
func (s *sim) buildCohort(root string) error {
	work := s.t.TempDir()
	s.dir = filepath.Join(work, "cohort")
	s.cohort = map[string]string{"ref-1": "ref", "ref-2": "ref", "ref-3": "ref", "starter": "starter"}
	var eg errgroup.Group
	eg.Go(func() error {
		bin := filepath.Join(work, "ref", "bin")
		if err := mutants.BuildPrograms(s.ctx, root, bin); err != nil {
			return fmt.Errorf("reference: %w", err)
		}
		for _, n := range []string{"ref-1", "ref-2", "ref-3"} {
			if err := copyDir(bin, filepath.Join(s.dir, n)); err != nil {
				return err
			}
		}
		return nil
	})
	eg.Go(func() error {
		c, err := starter.Plan(root)
		if err != nil {
			return err
		}
		src := filepath.Join(work, "starter", "src")
		if err := c.Write(src); err != nil {
			return err
		}
		return mutants.BuildPrograms(s.ctx, src, filepath.Join(s.dir, "starter"))
	})
	all, err := mutants.All()
	if err != nil {
		return err
	}
	for _, m := range all {
		if !slices.Contains(simMutants, m.Name) {
			continue
		}
		s.cohort[m.Name] = "mutant"
		eg.Go(func() error {
			bin, err := m.Build(s.ctx, root, filepath.Join(work, m.Name))
			if err != nil {
				return err
			}
			return copyDir(bin, filepath.Join(s.dir, m.Name))
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	if len(s.cohort) != 4+len(simMutants) {
		return fmt.Errorf("mutants %v: not all found in labsteps/mutants", simMutants)
	}
	return nil
}

// manifestArgs reads a container's args from a manifest: the one
// `args: [...]` line that starts with cmd (a YAML flow sequence of
// double-quoted strings, which is JSON). deploy/kubernetes's own test
// decodes the same files strictly with the Kubernetes types.
func manifestArgs(t *testing.T, file, cmd string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*args:\s*(\["` + cmd + `".*\])\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no `args: [\"%s\", …]` line", file, cmd)
	}
	var args []string
	if err := json.Unmarshal(m[1], &args); err != nil {
		t.Fatalf("%s: args: %v", file, err)
	}
	return args
}

// pod is what docker run takes of a manifest's pod: its user, the
// capabilities added back, its environment, and where each volume is
// mounted.
type pod struct {
	user   string
	caps   []string
	env    []string
	mounts map[string]string // volume name → mountPath
}

// manifestPod reads file's pod with regular expressions, as manifestArgs
// reads the args (deploy/kubernetes's test decodes the same strictly).
func manifestPod(t *testing.T, file string) pod {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := pod{mounts: map[string]string{}}
	m := regexp.MustCompile(`(?m)^\s*runAsUser:\s*([0-9]+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no runAsUser", file)
	}
	p.user = string(m[1]) + ":" + string(m[1])
	if m := regexp.MustCompile(`(?m)^\s*add:\s*\[([A-Z_, ]+)\]`).FindSubmatch(b); m != nil {
		for _, c := range strings.Split(string(m[1]), ",") {
			p.caps = append(p.caps, strings.TrimSpace(c))
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- \{name: ([A-Z_]+), value: ([^}]+)\}`).FindAllSubmatch(b, -1) {
		p.env = append(p.env, string(m[1])+"="+strings.TrimSpace(string(m[2])))
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- \{name: ([a-z]+), mountPath: ([^,}]+)`).FindAllSubmatch(b, -1) {
		p.mounts[string(m[1])] = strings.TrimSpace(string(m[2]))
	}
	if p.mounts["results"] == "" {
		t.Fatalf("%s: no results mount", file)
	}
	return p
}

// podArgs are the manifest's args for shard index of n, with $(VAR)
// expanded as the kubelet does (index < 0: the whole cohort without
// --shard, into the results volume).
// --jobs becomes 1: each simulated pod grades one submission at a time, so
// k shards are k-way parallelism on this machine.
func (s *sim) podArgs(index, n int) []string {
	var out []string
	for i := 0; i < len(s.args); i++ {
		a := s.args[i]
		switch {
		case a == "--shard" && index < 0, a == "--shards" && index < 0:
			i++
			continue
		case a == "--shards":
			out = append(out, a, strconv.Itoa(n))
			i++
			continue
		case a == "--out" && index < 0:
			out = append(out, a, s.pods["grade"].mounts["results"])
			i++
			continue
		case a == "--jobs":
			out = append(out, a, "1")
			i++
			continue
		}
		out = append(out, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(index)))
	}
	// lab grade takes flags after the submissions too.
	if s.points != "" {
		out = append(out, "--points", s.points)
	}
	if s.parallel != "" {
		out = append(out, "--parallel", s.parallel)
	}
	return out
}

type result struct {
	code int
	out  string
}

// dockerArgs are the job's pod as docker run flags: no network, the
// pod's user and capabilities (all others dropped), its environment, a
// read-only root, no privilege escalation, memory and pids limits, a /tmp
// of its own, its other emptyDirs as tmpfs, the cohort read-only, and the
// directory results/sub of the results volume where the pod mounts it
// (made, mode 0777: the pod's user writes it).
func (s *sim) dockerArgs(job, name string, index int, sub string) []string {
	p := s.pods[job]
	host := filepath.Join(s.results, sub)
	if err := os.MkdirAll(host, 0o777); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chmod(host, 0o777); err != nil {
		s.t.Fatal(err)
	}
	a := []string{"run", "--name", name, "--label", "snacklab.sim=" + s.id,
		"--network", "none", "--user", podUser(p), "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--memory", "2g", "--pids-limit", "4096",
		"--tmpfs", "/tmp:rw,exec,size=1g", "-v", host + ":" + p.mounts["results"]}
	for _, c := range p.caps {
		a = append(a, "--cap-add", c)
	}
	for _, e := range p.env {
		a = append(a, "-e", e)
	}
	if m := p.mounts["cohort"]; m != "" {
		a = append(a, "-v", s.dir+":"+m+":ro")
	}
	if m := p.mounts["cache"]; m != "" {
		a = append(a, "--tmpfs", m+":rw,size=1g")
	}
	if index >= 0 {
		a = append(a, "-e", "JOB_COMPLETION_INDEX="+strconv.Itoa(index))
	}
	return append(a, s.image)
}

func (s *sim) container(label string) string {
	s.seq++
	name := fmt.Sprintf("snacklab-sim-%s-%d-%s", s.id, s.seq, label)
	s.t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	return name
}

// run runs the image once with args (args[0] names the job's pod: grade
// or merge) and results/sub as the results volume, and waits.
func (s *sim) run(t *testing.T, label string, index int, sub string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(s.ctx, "docker", append(s.dockerArgs(args[0], s.container(label), index, sub), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("docker run: %v", err)
		}
		code = ee.ExitCode()
	}
	return result{code, out.String()}
}

// grade grades shard index of n with results/sub as the results volume
// (index < 0: the whole cohort into results/sub), and fails the test
// unless lab grade exits 0.
func (s *sim) grade(t *testing.T, sub string, index, n int) time.Duration {
	t.Helper()
	t0 := time.Now()
	r := s.run(t, fmt.Sprintf("%s-%d", sub, index), index, sub, s.podArgs(index, n)...)
	if r.code != 0 {
		t.Fatalf("shard %d/%d: lab grade exit %d\n%s", index, n, r.code, r.out)
	}
	return time.Since(t0)
}

// shards grades all n shards at once, as a Job with parallelism n does.
func (s *sim) shards(t *testing.T, sub string, n int) time.Duration {
	t.Helper()
	t0 := time.Now()
	var eg errgroup.Group
	for i := range n {
		name := s.container(fmt.Sprintf("%s-%d", sub, i))
		eg.Go(func() error {
			out, err := exec.CommandContext(s.ctx, "docker", append(s.dockerArgs("grade", name, i, sub), s.podArgs(i, n)...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("shard %d/%d: %v\n%s", i, n, err, out)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

// merge runs merge.yaml's container with results/sub at /results: it
// merges results/sub/shard-* into results/sub/merged.
func (s *sim) merge(t *testing.T, sub string, n int) {
	t.Helper()
	r := s.run(t, "merge-"+sub, -1, sub, s.mergeArgs...)
	if r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("merged %d shard(s)", n)) {
		t.Fatalf("lab merge of %s: exit %d\n%s", sub, r.code, r.out)
	}
}

// killMidway starts shard index of n again in sub, waits (polling, with a
// deadline) until it has written one submission's results, and kills it
// with SIGKILL, as a node lost mid-shard would.
func (s *sim) killMidway(t *testing.T, sub string, index, n int) {
	t.Helper()
	dir := filepath.Join(s.results, sub, fmt.Sprintf("shard-%d", index))
	if err := os.RemoveAll(dir); err != nil { // a fresh pod on a fresh node
		t.Fatal(err)
	}
	name := s.container(fmt.Sprintf("%s-%d-killed", sub, index))
	args := append(s.dockerArgs("grade", name, index, sub), s.podArgs(index, n)...)
	args = slices.Insert(args, 1, "-d")
	if out, err := exec.CommandContext(s.ctx, "docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run -d: %v\n%s", err, out)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		m, _ := filepath.Glob(filepath.Join(dir, "*", "results.json"))
		if len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard %d wrote no results.json within 5 minutes", index)
		}
		time.Sleep(50 * time.Millisecond) // a poll with a deadline, not a wait for time to pass
	}
	if out, err := exec.Command("docker", "kill", name).CombinedOutput(); err != nil {
		// It finished first: the re-run below is then a plain re-run.
		t.Logf("shard %d ended before the kill: %v %s", index, err, strings.TrimSpace(string(out)))
		return
	}
	t.Logf("shard %d killed (SIGKILL) after its first results.json", index)
}

// checkScores: the references get full marks, the others less.
func checkScores(t *testing.T, results, sub string, cohort map[string]string) {
	t.Helper()
	for name, kind := range cohort {
		b, err := os.ReadFile(filepath.Join(results, sub, name, "results.json"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var r struct{ Score, MaxScore float64 }
		var raw struct {
			Score float64 `json:"score"`
			Tests []struct {
				MaxScore float64 `json:"max_score"`
			} `json:"tests"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r.Score = raw.Score
		for _, x := range raw.Tests {
			r.MaxScore += x.MaxScore
		}
		// Parts split a step's points (40 over 3 parts), so their sum is
		// the step's points only to within rounding.
		if full := math.Abs(r.Score-r.MaxScore) < 1e-6 && r.MaxScore > 0; full != (kind == "ref") {
			t.Errorf("%s (%s): scored %g of %g; want full marks for the reference only", name, kind, r.Score, r.MaxScore)
		}
	}
}

// volatile are the parts of the grades that legitimately differ between
// two gradings of the same cohort: how long things took and when, and where
// a failing step's work dir was kept (the shard's --out and a random
// suffix; the submission's name and the step number are compared). Nothing
// else is blanked: scores, statuses, reasons, the cohort tables, the
// manifests and every other byte must be equal.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`/results/(shard-[0-9]+/)?`), // the --out a kept work dir is under
	regexp.MustCompile(`snacklab-step[0-9]+-[0-9]+`),
	// The number of a step's log file counts the processes it started, and
	// steps start some at once: their order is the scheduler's.
	regexp.MustCompile(`\b[0-9]{2}-(queuectl|sender|receiver)-`),
	// How many checks a passing step made: step 8's real-clock part skips
	// "B finds nothing before A's lease ends" when the machine was too slow
	// to ask before the lease ended.
	regexp.MustCompile(`[0-9]+ checks passed`),
	regexp.MustCompile(`"execution_time":\s*[0-9.e+-]+`),
	regexp.MustCompile(`"(took|duration)(_ms|_s)?":\s*[0-9.e+-]+`),
	regexp.MustCompile(`time="[0-9.]+"`),
	regexp.MustCompile(`timestamp="[^"]*"`),
	regexp.MustCompile(` *\b[0-9]+(\.[0-9]+)?\s?(ms|s)\b`), // with the padding of a right-aligned time
	regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}| UTC)?`),
}

func normalize(b []byte) []byte {
	for _, re := range volatile {
		b = re.ReplaceAll(b, []byte("<volatile>"))
	}
	return b
}

// compare: the same files, equal byte for byte after normalize.
func compare(t *testing.T, want, got string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				if d.Name() == "bin" || d.Name() == "logs" {
					return filepath.SkipDir // copies of the submission and work dirs: not grades
				}
				return nil
			}
			if d.Name() == "report.html" {
				// The story of one run (pids, ports, real-clock instants, the
				// timelines drawn from them): a second run tells another.
				// Compared for presence only; the grades are the rest.
				m[rel] = nil
				return nil
			}
			b, err := os.ReadFile(p)
			m[rel] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	w, g := files(want), files(got)
	// A step that ran out of time on a loaded machine is TIMEOUT, scored 0
	// and never a wrong answer: its submission's grades
	// depend on the load, not on the sharding. Such a submission, and the
	// cohort tables that sum it, are compared for presence only.
	timedOut := map[string]bool{}
	for _, m := range []map[string][]byte{w, g} {
		for name, b := range m {
			if sub, _, nested := strings.Cut(name, string(filepath.Separator)); nested && bytes.Contains(b, []byte("TIMEOUT")) {
				timedOut[sub] = true
			}
		}
	}
	if len(timedOut) > 0 {
		t.Logf("a step of %v timed out on this loaded machine: those submissions and the cohort tables are compared for presence only", slices.Sorted(maps.Keys(timedOut)))
	}
	for name, wb := range w {
		gb, ok := g[name]
		if !ok {
			t.Errorf("%s: in the unsharded grading, not in the merged one", name)
			continue
		}
		sub, _, nested := strings.Cut(name, string(filepath.Separator))
		if len(timedOut) > 0 && (!nested || timedOut[sub]) {
			continue
		}
		if nw, ng := normalize(wb), normalize(gb); !bytes.Equal(nw, ng) {
			t.Errorf("%s differs between the unsharded and the merged grading (timings blanked):\n%s", name, lineDiff(nw, ng, 6))
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("%s: in the merged grading, not in the unsharded one", name)
		}
	}
}

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	es, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o777)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o666)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lineDiff shows the first max lines that differ, by line number.
func lineDiff(want, got []byte, max int) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	var b strings.Builder
	if len(w) != len(g) {
		fmt.Fprintf(&b, "unsharded %d lines, merged %d\n", len(w), len(g))
	}
	for i := 0; i < len(w) && i < len(g) && max > 0; i++ {
		if w[i] != g[i] {
			at := 0 // show from a little before the first differing byte
			for at < len(w[i]) && at < len(g[i]) && w[i][at] == g[i][at] {
				at++
			}
			at = max0(at - 80)
			fmt.Fprintf(&b, "line %d, from byte %d:\n  unsharded: %.240s\n  merged:    %.240s\n", i+1, at, w[i][at:], g[i][at:])
			max--
		}
	}
	return b.String()
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// podUser is the pod's user (its manifest's runAsUser), when the test runs
// as root; otherwise the test's own user, so that t.TempDir can remove what
// the containers wrote (lab grade --isolate pod then refuses: it must be
// root to start the programs as other uids).
func podUser(p pod) string {
	if os.Getuid() == 0 {
		return p.user
	}
	return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
}
