package labsteps

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
	"snacklab/labsteps/systrace"
)

var step2 = Step{
	Step: result.Step{
		Num: 2, Slug: "durable",
		Title: "Durable acceptance: reported only after the commit reached the disk, survives kill -9, idempotent, rollback journal",
		Checks: "`queuectl enqueue` runs under strace while the harness holds the queue's write lock: once its trace shows " +
			"it tried the lock and was refused, it must have printed nothing; after the lock is released it must exit 0, " +
			"and its trace must show the commit on disk before the acceptance on stdout: after its last write to the " +
			"queue file, an fsync (or fdatasync) of that file and the deletion of the rollback journal, then the first " +
			"write to stdout. Killed with SIGKILL while it waits, it leaves nothing behind; with --busy-timeout-ms 100 it " +
			"waits at least 100 ms from its first refused attempt, then exits 6 having written nothing. An order accepted " +
			"while a sender holds the file open survives that sender's SIGKILL and is read back by a fresh process; the " +
			"same id and qty again is a duplicate that changes nothing; the same id with another qty is refused (exit 7) " +
			"with nothing written; `queuectl init` again leaves both orders as they were; the file is a rollback-journal " +
			"SQLite file with no -wal file.",
		Why: "\"Accepted\" is a promise to the customer: once the shop says it, no crash or power cut may lose the order, " +
			"and a retried submission must not become a second order or overwrite the first. With a rollback journal the " +
			"order is on disk only once the file is synced and the journal deleted; an answer printed earlier (before the " +
			"commit, inside an open transaction, or with synchronous=OFF) is a promise a crash can break.",
	},
	run: runStep2,
}

func runStep2(h *harness.Harness) {
	h.RequireStrace("step 2 judges durable acceptance from the system calls enqueue makes")
	h.Parallel(
		harness.Part{Name: "accepted only after the commit reached the disk", Run: acceptedAfterCommit},
		harness.Part{Name: "a crash while waiting for the lock leaves nothing", Run: crashWhileWaiting},
		harness.Part{Name: "busy past --busy-timeout-ms: exit 6, nothing written", Run: enqueueGivesUp},
		harness.Part{Name: "accepted orders survive kill -9", Run: survivesKill},
	)
}

// describeEnqueue puts enqueue's answer on the timeline.
func describeEnqueue(l harness.Line) (string, bool) {
	return "enqueue reported: " + harness.Trim(l.Text), true
}

func acceptedAfterCommit(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-accept.DB")
	h.Init()
	lock := h.HoldWriteLock()
	h.Clause("§2.enqueue.durable")
	// Its busy timeout is the harness's patience: this part judges when the
	// acceptance is printed, not how long the enqueue waits (step 7 does).
	enq := h.StartTraced("enqueue", result.LaneQueuectl, "queuectl", t0, describeEnqueue, harness.DurableCalls,
		append(h.QueuectlArgs("enqueue", t0, "--id", "o-1", "--qty", "7"), h.PatientBusy()...)...)
	enq.WaitRefused("enqueue tries the write lock the harness holds",
		"an enqueue must commit, and a commit needs the write lock: the harness holds it to stop the enqueue before its commit")
	early := enq.StdoutWrites(enq.Trace())
	observed := "tried the write lock, was refused, and printed nothing"
	if len(early) > 0 {
		observed = "wrote to stdout while the harness held the write lock: " + harness.CallText(early[0])
	} else if lines := enq.Lines(); len(lines) > 0 {
		observed = fmt.Sprintf("printed %q while the harness held the write lock", lines[0].Text)
	}
	h.Check("enqueue says nothing while it cannot commit", len(early) == 0 && len(enq.Lines()) == 0,
		"nothing on stdout until the commit", observed,
		"an acceptance reported before its commit is a promise a crash can break: the harness holds the lock, so nothing could have been committed yet")
	lock.Release()
	h.Clause("§2.busy.wait", "§2.busy.succeed", "§2.enqueue.durable")
	code, sig := enq.Wait("with the lock free again, the enqueue commits and ends")
	h.Check("enqueue accepts once the lock is released (exit 0)", code == 0 && sig == "", "exit 0",
		harness.ExitText(code, sig)+"; "+enq.Observed(), "it was given a busy timeout longer than the step: once the lock is free, the enqueue must commit and exit 0")
	h.Clause("§2.enqueue.durable", "§2.file.journal")
	ok, obs := durableOrder(enq, enq.Trace())
	h.Check("the acceptance reached stdout only after the commit reached the disk", ok,
		"in the trace: the last write to "+filepath.Base(h.DB)+", then an fsync or fdatasync of it, then the deletion of its -journal (the commit), then the first write to stdout",
		obs,
		"a rollback-journal commit is durable once the file is synced and the journal deleted; printed any earlier (before the commit, inside an open transaction, with synchronous=OFF), the acceptance can outlive the order")
	j := h.MustShow("o-1").Job
	h.Equal("a fresh process reads the accepted o-1", "o-1 qty=7 pending", fmt.Sprintf("%s qty=%d %s", j.ID, j.Qty, j.State),
		"what was accepted is on disk")
}

// durableOrder reads a finished enqueue's trace: the first write to stdout
// must come after a commit that reached the disk (systrace.Durable, the
// judgement lab crash makes too), and that commit must have been a
// rollback journal's: the -journal deleted after the file was synced.
func durableOrder(t *harness.Traced, tr *systrace.Trace) (bool, string) {
	outs := t.StdoutWrites(tr)
	base := filepath.Base(t.DB)
	if len(outs) == 0 {
		return false, "no write to stdout in the trace " + t.TraceFile + "; " + t.Observed()
	}
	s := outs[0].Seq
	where := fmt.Sprintf(" (first write to stdout: call %d, %s; trace %s)", s, harness.CallText(outs[0]), t.TraceFile)
	c, err := systrace.Durable(tr, t.DB, s, true)
	switch {
	case err != nil:
		return false, strings.ReplaceAll(err.Error(), t.DB, base) + where
	case c.JournalGone < 0:
		return false, fmt.Sprintf("%s was written (call %d) and synced (call %d), but no -journal was deleted after that before the acceptance was printed: with a rollback journal, deleting it is the commit (journal_mode=DELETE)%s", base, c.Write, c.Sync, where)
	}
	return true, fmt.Sprintf("last write to %s at call %d, fsync at call %d, journal deleted at call %d, acceptance printed at call %d", base, c.Write, c.Sync, c.JournalGone, s)
}

func crashWhileWaiting(h *harness.Harness) {
	h.Clause("§3.init.json", "§2.atomic", "§2.enqueue.durable")
	h.UseQueue("queue-crash.db")
	h.Init()
	lock := h.HoldWriteLock()
	enq := h.StartTraced("enqueue", result.LaneQueuectl, "queuectl", t0, describeEnqueue, harness.LockCalls,
		append(h.QueuectlArgs("enqueue", t0, "--id", "o-1", "--qty", "7"), h.PatientBusy()...)...)
	enq.WaitRefused("enqueue tries the write lock the harness holds", "the crash must land while the enqueue waits for its commit")
	// Killed before its output is read: Kill waits for the end of its stdout,
	// so a line written just before is not missed.
	enq.Kill()
	observed := "nothing printed"
	if lines := enq.Lines(); len(lines) > 0 {
		observed = fmt.Sprintf("printed %q while the harness held the write lock", lines[0].Text)
	}
	h.Check("enqueue printed nothing before it was killed", observed == "nothing printed", "nothing printed", observed,
		"it never got the lock, so it never committed: an acceptance here would be a lie")
	lock.Release()
	s := h.Show("o-1")
	h.ExpectExit("an enqueue killed before its commit left no order (show exits 8, not found)", 8, s.Run,
		"a crash before the commit must leave nothing half-written; the sender of the order did not get an acceptance and will submit again")
}

func enqueueGivesUp(h *harness.Harness) {
	h.Clause("§3.init.json")
	h.UseQueue("queue-busy.db")
	h.Init()
	lock := h.HoldWriteLock()
	h.Clause("§2.busy.wait", "§2.busy.fail", "§6.nothing-written")
	before := lock.Digest()
	enq := h.StartTraced("enqueue", result.LaneQueuectl, "queuectl", t0, describeEnqueue, harness.LockCalls,
		append(h.QueuectlArgs("enqueue", t0, "--id", "o-1", "--qty", "7"), harness.BusyFlag...)...)
	h.ExpectGivesUp(fmt.Sprintf("enqueue with --busy-timeout-ms %d", harness.ShortBusyMs), enq, lock, before)
	lock.Release()
	s := h.Show("o-1")
	h.ExpectExit("the enqueue that gave up left no order (show exits 8)", 8, s.Run,
		"busy is a refusal: the client was not told \"accepted\" and will submit again")
}

func survivesKill(h *harness.Harness) {
	h.Clause("§3.init.json", "§5.listening")
	h.Init()
	rcv := h.StartReceiver("receiver.db", "--hold-next", "1")
	h.MustEnqueue("o-1", 7, t0)
	a := h.StartSender("A", harness.SenderOpts{Mode: "run", URL: rcv.URL, Now: t0, LeaseMs: 30000})
	// The first request line for o-1 says what the receiver did with it:
	// waiting for a "held" line would only time out on a receiver that
	// answered instead.
	h.Clause("§5.flags", "§5.faults.hold", "§5.log")
	first := rcv.WaitLine("the receiver logs a request for o-1", func(l harness.Line) bool {
		return l.Str("event") == "request" && l.Str("id") == "o-1"
	}, "sender A must be stuck mid-delivery, with the queue file open, before the kill")
	h.Equal("the receiver started with --hold-next 1 holds o-1's answer: its log line", "held 0",
		fmt.Sprintf("%s %d", first.Str("result"), first.Int("status")),
		"CONTRACT §5: --hold-next N at start-up, as hold_next, commits the next N new orders and holds each answer; "+
			"sender A must be stuck mid-delivery, with the queue file open, before the kill")
	h.Clause("§2.enqueue.durable", "§2.enqueue.new", "§3.enqueue.json")
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
		fmt.Sprintf("%s %s %d", o1.State, harness.Repr(o1.Owner), o1.Token),
		"the claim was committed before A posted; the lease will run out and the job come back, rather than vanish with A")

	h.Section("repeats")
	h.Clause("§2.enqueue.dup", "§2.time.untouched", "§3.enqueue.json")
	rep := h.Enqueue("o-2", 7, t0+50)
	h.ExpectExit("the same id and qty again is accepted", 0, rep.Run,
		"a client that lost the answer retries; the retry must succeed, not fail")
	h.Equal("…and reported as a duplicate", "true", fmt.Sprint(rep.Duplicate),
		"the client learns its first submission already counted")
	after := h.MustShow("o-2").Job
	h.Equal("…and nothing about o-2 changed (not even updated_at)", o2.Canon, after.Canon,
		"a duplicate that rewrites the row could reset a job that is already being delivered")
	h.Clause("§2.enqueue.conflict", "§6.nothing-written")
	conf := h.Enqueue("o-2", 8, t0+60)
	h.ExpectExit("the same id with another qty is a conflict", 7, conf.Run,
		"two different orders under one id would make the id useless as evidence; the second must be refused")
	after = h.MustShow("o-2").Job
	h.Equal("…and nothing about o-2 changed", o2.Canon, after.Canon, "a refused request writes nothing (CONTRACT §6)")

	h.Section("init again")
	h.Clause("§3.init.existing", "§3.init.json")
	again := h.Queuectl("init", -1)
	h.ExpectExit("`queuectl init` on the existing queue file", 0, again,
		"CONTRACT §3: init of an existing queue file succeeds and leaves it as it is")
	shown = h.ShowAll("o-1", "o-2")
	h.Equal("after init again, o-1 and o-2 are as they were", o1.Canon+" "+o2.Canon,
		shown["o-1"].Job.Canon+" "+shown["o-2"].Job.Canon,
		"CONTRACT §3: init leaves an existing queue file as it is; an init that starts the file afresh loses every accepted order, the one promise a queue makes")

	h.Section("rollback journal")
	h.Clause("§2.file.journal")
	hdr, err := harness.ReadNoFollow(h.DB)
	if err == nil && len(hdr) < 100 {
		err = fmt.Errorf("%d bytes", len(hdr))
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
		h.Equal("no "+suffix+" file beside the queue after the crash", "absent", harness.Presence(err),
			"a -wal file means WAL mode; a -journal left behind means a write was cut off mid-transaction")
	}
}
