package crash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"snacklab/internal/powercut"
	"snacklab/labsteps/fresh"
	"snacklab/labsteps/harness"
)

// cutStory is one program of the story, recorded, with the files around
// it: the cut falls on the machine of the recorded program; the other
// machine's files (the receiver's for a queue program, the queue's for the
// receiver) are as that machine left them when the cut came, which
// depends only on whether the recorded program had sent it its message.
type cutStory struct {
	st    story
	model *powercut.Model
	// before and after are the data directory before and after the
	// recorded run; otherBefore is the other machine's side for a cut
	// before the message (for the receiver: sender A's POST failed).
	before, after, otherBefore map[string][]byte
	notes                      *world // what the setup's and the run's clients were told
	argv                       []string
	judged                     *harness.Judged
}

// recordStory sets the story's world up and records its program's run.
func recordStory(ctx context.Context, bin string, j *harness.Judged, st story, dir string) (*cutStory, int, error) {
	w, err := newWorld(ctx, bin, dir, j)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if w.recv != nil && w.recv.alive() {
			w.recv.kill()
		}
	}()
	if r := w.queuectl("init", t0); r.Code != 0 {
		return nil, w.procs, fmt.Errorf("queuectl init: %s: %s", r, firstLine(r.Stderr))
	}
	if err := st.setup(w); err != nil {
		return nil, w.procs, err
	}
	if st.name != "receiver" && (w.recv == nil || !w.recv.alive()) {
		if _, err := w.startReceiver(); err != nil { // up before the snapshot: it creates its file
			return nil, w.procs, err
		}
	}
	before, err := powercut.Snapshot(w.dir)
	if err != nil {
		return nil, w.procs, err
	}
	res, rec, err := w.recorded(st)
	if err != nil {
		return nil, w.procs, err
	}
	if res.Code != 0 {
		return nil, w.procs, fmt.Errorf("the story's %s, not cut, ended %s: %s", st.title, res, firstLine(res.Stderr))
	}
	if w.recv != nil && w.recv.alive() {
		w.recv.stop()
	}
	after, err := powercut.Snapshot(w.dir)
	if err != nil {
		return nil, w.procs, err
	}
	m, err := powercut.NewModel(rec)
	if err != nil {
		return nil, w.procs, err
	}
	cs := &cutStory{st: st, model: m, before: before, after: after, otherBefore: before, notes: w, argv: res.Argv, judged: j}
	if st.name == "receiver" {
		// Cut before its answer, the receiver never answered sender A:
		// A's POST failed (connection refused is what A sees) and A
		// recorded a retry.
		a, err := newWorld(ctx, bin, filepath.Join(dir, "sender-a-failed"), j)
		if err != nil {
			return nil, w.procs, err
		}
		if err := writeImage(a.dir, before, j); err != nil {
			return nil, w.procs, err
		}
		r := a.run("sender", "run-once", "--db", a.q, "--url", "http://127.0.0.1:1", "--owner", "A", "--json", "--now-ms", ms(t0+1000))
		if r.Code != 0 {
			return nil, w.procs + a.procs, fmt.Errorf("sender A whose POST fails: %s: %s", r, firstLine(r.Stderr))
		}
		if cs.otherBefore, err = powercut.Snapshot(a.dir); err != nil {
			return nil, w.procs + a.procs, err
		}
		return cs, w.procs + a.procs, nil
	}
	return cs, w.procs, nil
}

// image is every file of the data directory in state s of barrier b.
func (cs *cutStory) image(b powercut.Barrier, s powercut.State) map[string][]byte {
	base := cs.otherBefore
	if cs.sent(b) {
		base = cs.after
	}
	img := map[string][]byte{}
	for k, v := range base {
		img[k] = v
	}
	files := cs.model.Materialize(b, s.Fates)
	for _, name := range files.Touched {
		if c, ok := files.Content[name]; ok {
			img[name] = c
		} else {
			delete(img, name)
		}
	}
	return img
}

// sent says whether the program had sent on a socket before the cut (the
// sender's POST, the receiver's response).
func (cs *cutStory) sent(b powercut.Barrier) bool {
	for _, i := range b.Answers {
		if cs.model.Rec.Ops[i].Name == "socket" {
			return true
		}
	}
	return false
}

// printed is what the program had written to stdout before the cut.
func (cs *cutStory) printed(b powercut.Barrier) string {
	var s strings.Builder
	for _, i := range b.Answers {
		if op := cs.model.Rec.Ops[i]; op.Name == "stdout" {
			s.Write(op.Data)
		}
	}
	return s.String()
}

// check builds a state's files in dir, restarts the programs on them and
// checks what the program's answers promised and both files' integrity;
// then, when the recovery's outcome (its files and the answers given) is
// new, runs the rest of the story, drains the queue and checks everything.
func (cs *cutStory) check(ctx context.Context, bin string, b powercut.Barrier, image map[string][]byte, dir string, outcomes map[string]bool) (vs []vio, full bool, procs int, err error) {
	w, err := newWorld(ctx, bin, dir, cs.judged)
	if err != nil {
		return nil, false, 0, err
	}
	defer func() {
		if w.recv != nil && w.recv.alive() {
			w.recv.kill()
		}
		procs = w.procs
	}()
	if err := writeImage(w.dir, image, cs.judged); err != nil {
		return nil, false, w.procs, err
	}
	w.inherit(cs.notes)
	out := cutOutput{stdout: cs.printed(b), sent: cs.sent(b), answered: cs.answered(b)}
	res := result{Argv: cs.argv, Stdout: out.stdout, Code: -1, Signal: "power cut"}
	if out.stdout != "" && cs.st.name != "sender" {
		res.Code, res.Signal = 0, "" // the client was told
	}
	w.note(res)
	vs, seen := w.afterCut(cs.st, out)
	for _, f := range []string{w.q, w.r} {
		if _, ok := image[filepath.Base(f)]; !ok {
			continue
		}
		if err := w.integrity(f); err != nil {
			vs = append(vs, vio{InvIntegrity, fmt.Sprintf("%s: %v", filepath.Base(f), err)})
		}
	}
	// The outcome: what the restarted program reported, the other
	// machine's files, and what the program had answered.
	other := map[string][]byte{}
	for name, b := range image {
		if !slices.Contains(cs.model.Touched(), name) {
			other[name] = b
		}
	}
	key := fmt.Sprintf("%d/%s/%s", len(b.Answers), seen, digest(other))
	if outcomes[key] {
		return vs, false, w.procs, nil
	}
	outcomes[key] = true
	if cs.st.after != nil {
		if err := cs.st.after(w, res); err != nil {
			vs = append(vs, vio{InvRestart, err.Error()})
		}
	}
	now, err := w.drain(t0+10_000, false)
	if err != nil {
		vs = append(vs, vio{InvDrain, err.Error()})
	}
	return append(vs, w.check(now)...), true, w.procs, nil
}

// answered says whether the receiver's first response before the cut was
// a 200: the order accepted.
func (cs *cutStory) answered(b powercut.Barrier) bool {
	for _, i := range b.Answers {
		if op := cs.model.Rec.Ops[i]; op.Name == "socket" {
			return strings.HasPrefix(string(op.Data), "HTTP/1.1 200")
		}
	}
	return false
}

// inherit takes what the clients of another world were told.
func (w *world) inherit(from *world) {
	from.mu.Lock()
	defer from.mu.Unlock()
	w.grants = append(w.grants, from.grants...)
	for k, v := range from.accepted {
		w.accepted[k] = v
	}
	for k, v := range from.redriveOK {
		w.redriveOK[k] += v
	}
	for k, v := range from.redriveKilled {
		w.redriveKilled[k] += v
	}
}

// writeImage writes a state's files into a fresh data dir, each created
// afresh (nothing planted at the name is written through) and handed to
// the judged, whose programs restart on them.
func writeImage(dir string, files map[string][]byte, j *harness.Judged) error {
	for name, b := range files {
		path := filepath.Join(dir, name)
		if err := fresh.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		if err := j.Own(path); err != nil {
			return fmt.Errorf("hand %s to the judged: %w", name, err)
		}
	}
	return nil
}

// digest identifies a set of files by their names and contents.
func digest(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}
