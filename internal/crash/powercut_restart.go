package crash

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"snacklab/internal/powercut"
)

// recorded runs the story's program to its end under the recorder (for the
// receiver, with sender A's POST to it, then SIGTERM) and returns what it
// printed and what it did to the data directory. Unlike traced, it notes
// nothing: what the program's clients were told depends on where a cut
// falls.
func (w *world) recorded(st story) (result, *powercut.Recording, error) {
	var url string
	if st.name != "receiver" {
		url = w.recv.URL
	}
	argv := st.argv(w, url)
	root, err := filepath.Abs(w.dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root) // the kernel names files by their real path
	}
	if err != nil {
		return result{}, nil, err
	}
	out, errf, err := w.logPair("recorded-" + st.name)
	if err != nil {
		return result{}, nil, err
	}
	defer errf.Close()
	// As the judged, through the judged-exec step: the recorder stays the
	// judge's.
	full, err := w.judged.TracedArgv(filepath.Join(w.bin, argv[0]))
	if err != nil {
		out.Close()
		return result{}, nil, err
	}
	full = append(full, argv[1:]...)
	stdout := out
	var pr *os.File
	if st.name == "receiver" {
		if pr, stdout, err = os.Pipe(); err != nil {
			out.Close()
			return result{}, nil, err
		}
	}
	p, err := powercut.Start(full, powercut.Options{Root: root, Dir: w.cwd, Env: w.judged.Env(), Stdout: stdout, Stderr: errf})
	if st.name == "receiver" {
		stdout.Close()
	}
	if err != nil {
		out.Close()
		return result{}, nil, err
	}
	if st.name == "receiver" {
		w.driveReceiver(p, pr, out)
	}
	rec, err := p.Wait()
	out.Close()
	if err != nil {
		return result{}, nil, err
	}
	res := result{Argv: argv, Code: rec.Code, Signal: rec.Signal}
	b, _ := os.ReadFile(out.Name())
	res.Stdout = string(b)
	b, _ = os.ReadFile(errf.Name())
	res.Stderr = string(b)
	if st.name == "receiver" && res.Signal == "" {
		res.Code = 0 // stopped by SIGTERM, as the story does: its exit code is its own affair
	}
	return res, rec, nil
}

// cutOutput is what the recorded program had said when the power went.
type cutOutput struct {
	stdout   string // printed
	sent     bool   // sent on a socket: the sender's POST, the receiver's response
	answered bool   // the receiver's response was a 200
}

// afterCut restarts on the files a cut left (the program's own recovery:
// a queuectl show, or the receiver) and checks what the answers given
// before the cut promised. It returns what the restarted program reported
// (queuectl show's answer; the receiver's order and stock), which
// identifies the recovery's outcome.
func (w *world) afterCut(st story, out cutOutput) ([]vio, string) {
	if st.name == "receiver" {
		return w.receiverAfterCut(out.answered)
	}
	j, state, seen, err := w.showJob()
	if err != nil {
		return []vio{{InvRestart, err.Error()}}, ""
	}
	if st.name == "sender" {
		return senderAfterCut(out.stdout, j, state), seen
	}
	return answerAfterCut(st, out.stdout != "", j, state), seen
}

// showJob is job o-1 as queuectl show reports it after the restart;
// "absent" when there is none. seen is show's whole answer.
func (w *world) showJob() (j job, state, seen string, err error) {
	r := w.queuectl("show", t0+2500, "--id", orderID)
	switch r.Code {
	case 0:
		var s shown
		if err := json.Unmarshal([]byte(firstLine(r.Stdout)), &s); err != nil {
			return job{}, "", "", fmt.Errorf("queuectl show after the power cut printed %q: %v", firstLine(r.Stdout), err)
		}
		return s.Job, s.Job.State, r.Stdout, nil
	case 8:
		return job{}, "absent", "absent", nil
	}
	return job{}, "", "", fmt.Errorf("queuectl show after the power cut: %s: %s", r, firstLine(r.Stderr))
}

// answerAfterCut: enqueue, redrive, finish. Told, the job must be in the
// state the answer reported; not told, in the state before or after.
func answerAfterCut(st story, told bool, j job, state string) []vio {
	want := st.states
	if told {
		want = st.states[len(st.states)-1:]
	}
	switch {
	case told && !slices.Contains(want, state):
		return []vio{{InvAnswered, fmt.Sprintf("%s had answered before the power cut, so job %s must be %s; after the restart it is %s: the answered change was lost",
			st.title, orderID, want[0], state)}}
	case !slices.Contains(want, state):
		return []vio{{InvAtomic, fmt.Sprintf("after a power cut during %s, job %s is %s; it must be %s (the state before or after, never a third)",
			st.title, orderID, state, strings.Join(want, " or "))}}
	case told && st.name == "enqueue" && j.Qty != qty:
		return []vio{{InvAnswered, fmt.Sprintf("the enqueue answered qty %d; after the restart job %s has qty %d", qty, orderID, j.Qty)}}
	}
	return nil
}

// senderAfterCut: a grant the sender printed is never given again (the job
// holds at least that token), and a finish it printed as applied holds.
func senderAfterCut(stdout string, j job, state string) []vio {
	var vs []vio
	for _, l := range (result{Stdout: stdout}).lines() {
		switch {
		case l["event"] == "claimed" && num(l["token"]) > j.Token:
			vs = append(vs, vio{InvTokens, fmt.Sprintf("sender A printed that it was granted token %d before the power cut; after the restart job %s is %s with token %d: the grant was lost, and the next claim hands token %d out again",
				num(l["token"]), orderID, state, j.Token, j.Token+1)})
		case l["event"] == "finished" && l["applied"] == true && str(l["state"]) != state:
			vs = append(vs, vio{InvAnswered, fmt.Sprintf("sender A printed that its finish left job %s %s before the power cut; after the restart it is %s: the finish was lost",
				orderID, str(l["state"]), state)})
		}
	}
	return vs
}

// receiverAfterCut: the receiver restarts on its file, and an order it had
// answered 200 is there with its qty (sender A recorded the job done on
// that answer, and nobody will send it again).
func (w *world) receiverAfterCut(answered bool) ([]vio, string) {
	rc, err := w.startReceiver()
	if err != nil {
		return []vio{{InvRestart, fmt.Sprintf("the receiver does not start on the file the power cut left: %v", err)}}, ""
	}
	defer rc.stop()
	var o, stock map[string]any
	found, err := getJSON(rc.URL, "/orders/"+orderID, &o)
	if err == nil {
		_, err = getJSON(rc.URL, "/stock", &stock)
	}
	seen := fmt.Sprint(found, o, stock)
	switch {
	case err != nil:
		return []vio{{InvRestart, fmt.Sprintf("GET /orders/%s and /stock after the power cut: %v", orderID, err)}}, ""
	case answered && !found:
		return []vio{{InvAnswered, fmt.Sprintf("the receiver answered 200 to sender A's POST of %s before the power cut; after its restart it has no order %s (A recorded the job done: nobody sends it again)", orderID, orderID)}}, seen
	case found && num(o["qty"]) != qty:
		return []vio{{InvAnswered, fmt.Sprintf("after the power cut the receiver holds order %s with qty %v, want %d", orderID, o["qty"], qty)}}, seen
	}
	return nil, seen
}
