package labsteps

import (
	"fmt"
	"os"
	"time"
)

var step2 = Step{
	Num: 2, Slug: "durable",
	Title: "Durable acceptance: reported only after the commit, survives kill -9, idempotent, rollback journal",
	Checks: "While the harness holds the queue's write lock, `queuectl enqueue` must wait and say nothing " +
		"(an acceptance reported before its commit is caught here); killed with SIGKILL while it waits, it " +
		"leaves nothing behind. An order accepted while a sender holds the file open survives that sender's " +
		"SIGKILL and is read back by a fresh process; the same id and qty again is a duplicate that changes " +
		"nothing; the same id with another qty is refused (exit 7) with nothing written; the file is a " +
		"rollback-journal SQLite file with no -wal file.",
	Why: "\"Accepted\" is a promise to the customer: once the shop says it, no crash may lose the order, and " +
		"a retried submission must not become a second order or overwrite the first.",
	run: runStep2,
}

func runStep2(h *Harness) {
	h.Init()

	h.Section("accepted only after the commit")
	lock := h.HoldWriteLock()
	enq := h.start("enqueue", LaneQueuectl, "queuectl", t0, func(l Line) (string, bool) {
		return "enqueue reported: " + trim(l.Text), true
	}, h.qArgs("enqueue", t0, "--id", "o-1", "--qty", "7")...)
	blocked := h.WaitBlocked(2*time.Second, enq)
	ex, code, sig := enq.Exited()
	// Killed before its output is read: Kill waits for the end of its stdout,
	// so a line written just before it went to sleep is not missed.
	enq.Kill()
	lines := enq.Lines()
	observed := "waiting, nothing printed"
	switch {
	case len(lines) > 0:
		observed = fmt.Sprintf("printed %q while the harness held the write lock", lines[0].Text)
	case ex:
		observed = "ended with " + exitText(code, sig) + " while the lock was held" + enq.StderrHint()
	case !blocked:
		observed = "still running but never seen asleep within 2s; nothing printed"
	}
	h.Check("enqueue says nothing while it cannot commit", len(lines) == 0 && !ex,
		"enqueue waits for the write lock and prints nothing", observed,
		"an acceptance reported before its commit is a promise a crash can break: the harness holds the lock, "+
			"so nothing could have been committed yet")
	lock.Release()
	s := h.Show("o-1")
	h.ExpectExit("an enqueue killed before its commit left no order (show exits 8, not found)", 8, s.Run,
		"a crash before the commit must leave nothing half-written; the sender of the order did not get an acceptance and will submit again")

	h.Section("accepted orders survive kill -9")
	rcv := h.StartReceiver("receiver.db", "--hold-next", "1")
	h.MustEnqueue("o-1", 7, t0)
	a := h.StartSender("A", SenderOpts{Mode: "run", URL: rcv.URL, Now: t0, LeaseMs: 30000})
	rcv.WaitRequest("o-1", "held", "sender A must be stuck mid-delivery, with the queue file open, before the kill")
	acc := h.Enqueue("o-2", 7, t0+1)
	h.ExpectExit("enqueue o-2 while sender A has the queue open mid-delivery", 0, acc.Run,
		"a running sender must not stop the shop from accepting orders")
	h.Equal("the acceptance of o-2 reports a new order", "false", fmt.Sprint(acc.Duplicate), "o-2 was never enqueued before")
	a.Kill()
	shown := h.ShowAll("o-1", "o-2")
	o1, o2 := shown["o-1"].Job, shown["o-2"].Job
	h.Equal("after kill -9 of A, a fresh process reads o-2", "o-2 qty=7 pending attempts=0 token=0",
		fmt.Sprintf("%s qty=%d %s attempts=%d token=%d", o2.ID, o2.Qty, o2.State, o2.Attempts, o2.Token),
		"an accepted order is on disk, not in the memory of some process that can die")
	h.Equal("o-2's deadline is its enqueue time plus the default window (86400000 ms)", int64(t0+1+86400000), o2.DeadlineAt,
		"the deadline is fixed at acceptance, so a crash and restart cannot stretch it")
	h.Equal("A's claim of o-1 survived A's death too (state, owner, token)", "leased A 1",
		fmt.Sprintf("%s %s %d", o1.State, show(o1.Owner), o1.Token),
		"the claim was committed before A posted; the lease will run out and the job come back, rather than vanish with A")

	h.Section("repeats")
	rep := h.Enqueue("o-2", 7, t0+50)
	h.ExpectExit("the same id and qty again is accepted", 0, rep.Run,
		"a client that lost the answer retries; the retry must succeed, not fail")
	h.Equal("…and reported as a duplicate", "true", fmt.Sprint(rep.Duplicate),
		"the client learns its first submission already counted")
	after := h.MustShow("o-2").Job
	h.Equal("…and nothing about o-2 changed (not even updated_at)", o2.Canon, after.Canon,
		"a duplicate that rewrites the row could reset a job that is already being delivered")
	conf := h.Enqueue("o-2", 8, t0+60)
	h.ExpectExit("the same id with another qty is a conflict", 7, conf.Run,
		"two different orders under one id would make the id useless as evidence; the second must be refused")
	after = h.MustShow("o-2").Job
	h.Equal("…and nothing about o-2 changed", o2.Canon, after.Canon, "a refused request writes nothing (CONTRACT §6)")

	h.Section("rollback journal")
	hdr := make([]byte, 100)
	f, err := os.Open(h.DB)
	if err == nil {
		_, err = f.ReadAt(hdr, 0)
		f.Close()
	}
	if err != nil {
		h.Fatalf("read the queue file's header", "100 bytes", "", "%v", err)
	}
	h.Equal("the queue file is SQLite", "SQLite format 3\x00", string(hdr[:16]), "the contract names one SQLite file")
	h.Equal("header bytes 18–19 (file format write/read version): 1 = rollback journal, 2 = WAL", "1 1",
		fmt.Sprintf("%d %d", hdr[18], hdr[19]),
		"the seed chose a rollback journal for short queue writes; a WAL file needs its -wal and -shm beside it to be whole")
	for _, suffix := range []string{"-wal", "-journal"} {
		_, err := os.Stat(h.DB + suffix)
		h.Equal("no "+suffix+" file beside the queue after the crash", "absent", presence(err),
			"a -wal file means WAL mode; a -journal left behind means a write was cut off mid-transaction")
	}
}

func presence(err error) string {
	if err == nil {
		return "present"
	}
	if os.IsNotExist(err) {
		return "absent"
	}
	return err.Error()
}
