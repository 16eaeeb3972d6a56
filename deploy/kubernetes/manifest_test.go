// Package kubernetes_test checks the manifests of deploy/kubernetes without
// a cluster: every document decodes strictly (an unknown or misspelt field
// is an error, as `kubectl apply --validate=strict` would say) into the
// Kubernetes API types, and the Job keeps the promises docs/kubernetes.md
// makes (indexed shards whose count matches, no network, the judge root with
// only its six capabilities and everything it judges under /judge, limits).
// It is its own module so that the snacklab module never depends on k8s.io.
package kubernetes_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// documents splits a manifest file into its YAML documents.
func documents(t *testing.T, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// decode reads every document of file strictly into the type its kind names.
func decode(t *testing.T, file string) []any {
	t.Helper()
	var out []any
	for i, d := range documents(t, file) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "v1 PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		default:
			t.Fatalf("%s document %d: unexpected %s %s", file, i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			t.Fatalf("%s document %d (%s): strict decoding: %v", file, i, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	bad := []byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionMode: Indexed\n  paralellism: 2\n")
	if err := yaml.UnmarshalStrict(bad, &batchv1.Job{}); err == nil || !strings.Contains(err.Error(), "paralellism") {
		t.Fatalf("a misspelt field: got %v, want a strict-decoding error naming it", err)
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, f := range []string{"volumes.yaml", "grade.yaml", "merge.yaml"} {
		if got := len(decode(t, f)); got == 0 {
			t.Errorf("%s: no documents", f)
		}
	}
}

// arg returns the value after flag in args.
func arg(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

func TestGradeJob(t *testing.T) {
	objs := decode(t, "grade.yaml")
	var job *batchv1.Job
	var pol *networkingv1.NetworkPolicy
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.Job:
			job = o
		case *networkingv1.NetworkPolicy:
			pol = o
		}
	}
	if job == nil || pol == nil {
		t.Fatalf("grade.yaml: want a Job and a NetworkPolicy, got %d documents", len(objs))
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode: got %v, want Indexed (JOB_COMPLETION_INDEX is the shard)", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Parallelism < 1 || *s.Parallelism > *s.Completions {
		t.Fatalf("completions %v, parallelism %v: want 1 <= parallelism <= completions", s.Completions, s.Parallelism)
	}
	if s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds <= 0 {
		t.Errorf("activeDeadlineSeconds: got %v, want a deadline", s.ActiveDeadlineSeconds)
	}
	if s.BackoffLimitPerIndex == nil {
		t.Errorf("backoffLimitPerIndex: want a per-shard retry bound")
	}
	checkPod(t, "grade", job.Spec.Template, judgeCaps)
	c := job.Spec.Template.Spec.Containers[0]
	a := c.Args
	if a[0] != "grade" || slices.Contains(a, "--trusted") {
		t.Errorf("args %q: want grade, never --trusted (the judged would run as the judge)", a)
	}
	if v, _ := arg(a, "--isolate"); v != "pod" {
		t.Errorf("args %q: want --isolate pod: no Docker engine in a pod, so the lab separates the judged from itself", a)
	}
	if v, _ := arg(a, "--shard"); v != "auto" {
		t.Errorf("args %q: want --shard auto", a)
	}
	if v, _ := arg(a, "--shards"); v != strconv.Itoa(int(*s.Completions)) {
		t.Errorf("--shards %q but completions %d: they must be equal, or shards are graded twice or never", v, *s.Completions)
	}
	if v, _ := arg(a, "--out"); v != "/judge/results/shard-$(JOB_COMPLETION_INDEX)" {
		t.Errorf("--out %q: want /judge/results/shard-$(JOB_COMPLETION_INDEX), one directory per shard (merge.yaml reads shard-* of the same volume)", v)
	}
	var results *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == "/judge/results" {
			results = &c.VolumeMounts[i]
		}
		// Everything mounted is the judge's (under /judge, 0700 in the
		// image) but /tmp, the judged's scratch space.
		if m.MountPath != "/tmp" && !strings.HasPrefix(m.MountPath, "/judge/") {
			t.Errorf("mount %s at %s: want it under /judge, out of the judged's reach", m.Name, m.MountPath)
		}
	}
	if results == nil || results.SubPath != "" || results.SubPathExpr != "" || results.ReadOnly {
		t.Errorf("/judge/results mount %+v: want the writable volume itself (a subPath directory is made before the pod knows its shard)", results)
	}
	var gocache string
	for _, e := range c.Env {
		if e.Name == "GOCACHE" {
			gocache = e.Value
		}
	}
	if !strings.HasPrefix(gocache, "/judge/") {
		t.Errorf("GOCACHE %q: want it under /judge (the image's default is on /tmp, which the judged read: the build cache holds the submission's compiled code)", gocache)
	}
	jobs, _ := arg(a, "--jobs")
	n, err := strconv.Atoi(jobs)
	cpu := c.Resources.Limits[corev1.ResourceCPU]
	if err != nil || n < 1 || resource.NewQuantity(int64(n), resource.DecimalSI).Cmp(cpu) > 0 {
		t.Errorf("--jobs %q with a CPU limit of %s: want an explicit --jobs of at most the limit (lab's default is the node's cores)", jobs, cpu.String())
	}
	if got := a[len(a)-1]; got != "/judge/cohort/*" {
		t.Errorf("the cohort argument: got %q, want /judge/cohort/* (lab expands it: no shell in the image)", got)
	}

	if len(pol.Spec.PolicyTypes) != 2 || len(pol.Spec.Ingress) != 0 || len(pol.Spec.Egress) != 0 {
		t.Errorf("NetworkPolicy: types %v, %d ingress and %d egress rules; want Ingress and Egress with no rule (deny all)",
			pol.Spec.PolicyTypes, len(pol.Spec.Ingress), len(pol.Spec.Egress))
	}
	for k, v := range pol.Spec.PodSelector.MatchLabels {
		if job.Spec.Template.Labels[k] != v {
			t.Errorf("NetworkPolicy selects %s=%s, which the grading pods do not carry: they would have network", k, v)
		}
	}
	if len(pol.Spec.PodSelector.MatchLabels) == 0 {
		t.Errorf("NetworkPolicy selects no label: it must select the grading pods")
	}
}

func TestMergeJob(t *testing.T) {
	objs := decode(t, "merge.yaml")
	if len(objs) != 1 {
		t.Fatalf("merge.yaml: %d documents, want 1 Job", len(objs))
	}
	job := objs[0].(*batchv1.Job)
	checkPod(t, "merge", job.Spec.Template, nil)
	a := job.Spec.Template.Spec.Containers[0].Args
	if want := []string{"merge", "--out", "/results/merged", "/results/shard-*"}; !slices.Equal(a, want) {
		t.Errorf("merge args: got %q, want %q", a, want)
	}
}

// judgeCaps are the capabilities a grading pod's lab keeps: those of a
// grading container's judge (internal/isolate.JudgeCaps).
var judgeCaps = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID", "SYS_PTRACE"}

// checkPod holds what every snacklab pod promises: its one container runs
// as root with exactly caps added back after dropping all (the judge; the
// merge adds none), no escalation, a read-only root, limits.
func checkPod(t *testing.T, name string, tpl corev1.PodTemplateSpec, caps []corev1.Capability) {
	t.Helper()
	p := tpl.Spec
	fail := func(format string, args ...any) { t.Errorf("%s pod: %s", name, fmt.Sprintf(format, args...)) }
	if p.RestartPolicy != corev1.RestartPolicyNever {
		fail("restartPolicy %q, want Never (the Job retries a failed shard in a fresh pod)", p.RestartPolicy)
	}
	if p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
		fail("automountServiceAccountToken must be false: a submission must not reach the API server")
	}
	sc := p.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		fail("want runAsUser 0: the lab is the judge, root with only its capabilities (the image's lab is root's alone)")
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%s pod: %d containers, want 1", name, len(p.Containers))
	}
	c := p.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		fail("want readOnlyRootFilesystem")
	}
	if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		fail("want allowPrivilegeEscalation: false")
	}
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || !slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		fail("want capabilities dropped (ALL)")
	} else if add := c.SecurityContext.Capabilities.Add; !slices.Equal(add, caps) {
		fail("capabilities added: got %v, want exactly %v", add, caps)
	}
	if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		fail("privileged: want never")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Limits[r]; !ok {
			fail("no %s limit", r)
		}
	}
	if len(c.Command) != 1 || c.Command[0] != "/usr/local/bin/lab" {
		fail("command %q, want the image's lab", c.Command)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			fail("mount %s names no volume", m.Name)
			continue
		}
		switch m.MountPath {
		case "/judge/cohort":
			if !m.ReadOnly || v.PersistentVolumeClaim == nil || !v.PersistentVolumeClaim.ReadOnly {
				fail("the cohort must be mounted read-only (mount and claim)")
			}
		case "/tmp":
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
				fail("/tmp must be a size-limited emptyDir (the root is read-only; builds and steps write there)")
			}
		}
	}
}
