package crash

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"snacklab/labsteps/harness"
	"strconv"
	"strings"
)

// batchStory is the sender's story in batched delivery (CONTRACT.md
// §4.batch), what `lab crash --batch N` runs in place of the sender story:
// N orders enqueued, then one `sender run-once --batch N` claims them in one
// transaction, POSTs each and finishes them in one transaction, killed at
// each of its crash points. Its last line is the batch's last `finished`
// event, so the run that was not killed is judged on the finish commit.
func batchStory(n int) story {
	st := stories["sender"]
	st.name = "sender"
	st.title = fmt.Sprintf("sender run-once --batch %d (claim %d, POST each, finish %d)", n, n, n)
	st.setup = func(w *world) error {
		for i := range n {
			if err := w.must(w.queuectl("enqueue", t0, "--id", batchID(i), "--qty", ms(qty+int64(i)))); err != nil {
				return err
			}
		}
		return nil
	}
	st.argv = func(w *world, url string) []string {
		return []string{"sender", "run-once", "--db", w.q, "--url", url, "--owner", "A", "--json",
			"--now-ms", ms(t0 + 1000), "--batch", strconv.Itoa(n)}
	}
	st.batch = n
	return st
}

// atomicBatch checks that the killed batch left its jobs all in one state:
// all pending (the claim did not commit), all leased (the finish did not),
// or all done. A mix means a claim or a finish of the batch committed part
// of it (CONTRACT.md §4.batch.claim, §4.batch.finish).
func (w *world) atomicBatch(st story) error {
	states := map[string][]string{}
	for i := range st.batch {
		id := batchID(i)
		r := w.queuectl("show", t0+2500, "--id", id)
		var s shown
		if r.Code != 0 || json.Unmarshal([]byte(firstLine(r.Stdout)), &s) != nil {
			return fmt.Errorf("%w: queuectl show --id %s after the crash: %s: %s", errUnreadable, id, r, firstLine(r.Stderr))
		}
		states[s.Job.State] = append(states[s.Job.State], id)
	}
	if len(states) == 1 {
		return nil
	}
	var parts []string
	for _, state := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%s %s", strings.Join(states[state], ", "), state))
	}
	return fmt.Errorf("after %s was killed, its batch is split: %s; a batch's claim and its finish are each one transaction, so a crash leaves all of its jobs before or all after",
		st.title, strings.Join(parts, "; "))
}

// batchID is the id of the batch story's i-th order: o-1 first, so that the
// claim's order (available_at, then id) is o-1, o-2, …
func batchID(i int) string { return "o-" + strconv.Itoa(i+1) }

// batchArgs is what the soak's senders and the replay lines add in batched mode.
func batchArgs(cfg Config) []string {
	if cfg.Batch <= 1 {
		return nil
	}
	return []string{"--batch", strconv.Itoa(cfg.Batch)}
}

// judgedArgs is what a replay line adds when the programs ran as a judged
// identity, so that the replay runs them as the grade did.
func judgedArgs(j *harness.Judged) []string {
	if j == nil {
		return nil
	}
	return []string{"--judged-uid", strconv.FormatUint(uint64(j.UID), 10), "--judged-gid", strconv.FormatUint(uint64(j.GID), 10)}
}
