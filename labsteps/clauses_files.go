package labsteps

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"snacklab/labsteps/harness"
)

// theirFiles: no program takes over a file that is not a queue it made
// (CONTRACT §2, §3 init, §6). `init` refuses another application's SQLite
// file, even an unmarked one, and a file in WAL mode, changing neither; every
// program but init refuses a missing queue file and creates nothing; init
// refuses a missing directory and does not make it.
func theirFiles(h *harness.Harness) {
	whyForeign := "CONTRACT §2: another application's SQLite file is refused (exit 5), never read as an empty queue and never " +
		"given the queue's tables: `init` that adds its tables to someone else's database damages data it does not own"
	h.Clause("§2.file.foreign")
	h.UseQueue("unmarked-app.db")
	// user_version 0, application_id 0: nothing marks it, only its tables say whose it is.
	h.MakeSQLite("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hello');")
	unmarked := "another application's unmarked SQLite file (a table notes, user_version 0, application_id 0)"
	h.ExpectRefused([]harness.Refusal{
		{What: unmarked, Call: harness.Call{Verb: "init", Now: -1}, Code: 5, Why: whyForeign},
		{What: unmarked, Call: harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "o-1", "--qty", "7"}}, Code: 5, Why: whyForeign},
		{What: unmarked, Call: harness.Call{Verb: "stats", Now: t0}, Code: 5, Why: whyForeign},
	}, nil)
	h.UseQueue("marked-app.db")
	h.MakeSQLite("CREATE TABLE notes (body TEXT); PRAGMA user_version = 99;")
	h.ExpectRefused([]harness.Refusal{{What: "another application's SQLite file (user_version 99)", Call: harness.Call{Verb: "init", Now: -1},
		Code: 5, Why: whyForeign}}, nil)

	h.Clause("§2.file.wal-refused")
	whyWAL := "CONTRACT §2: a file in another journal mode (WAL) is refused (exit 5), never switched: switching it under " +
		"another process that uses it in WAL mode breaks that process, and the queue's durability rests on the rollback journal"
	h.UseQueue("queue-wal.db")
	h.Init()
	h.MustEnqueue("o-1", 7, t0)
	h.MakeSQLite("PRAGMA journal_mode=WAL;")
	wal := "the queue file switched to WAL mode"
	h.ExpectRefused([]harness.Refusal{
		{What: wal, Call: harness.Call{Verb: "init", Now: -1}, Code: 5, Why: whyWAL},
		{What: wal, Call: harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "o-2", "--qty", "7"}}, Code: 5, Why: whyWAL},
		{What: wal, Call: harness.Call{Verb: "claim", Now: t0, Args: []string{"--owner", "A"}}, Code: 5, Why: whyWAL},
		{What: wal, Call: harness.Call{Verb: "stats", Now: t0}, Code: 5, Why: whyWAL},
	}, nil)

	missingFile(h)
	flagsFirst(h)
}

// missingFile: the verbs of the contract but init, and the sender, refuse a missing queue
// file (exit 4) and leave no file behind; init refuses a missing directory.
func missingFile(h *harness.Harness) {
	h.Clause("§2.file.missing")
	h.UseQueue("never-made.db")
	db := h.DB
	calls := [][]string{
		append([]string{"queuectl"}, h.QueuectlArgs("stats", t0)...),
		append([]string{"queuectl"}, h.QueuectlArgs("check", -1)...),
		append([]string{"queuectl"}, h.QueuectlArgs("finish", t0, "--id", "o-1", "--token", "1", "--outcome", "ok")...),
		append([]string{"queuectl"}, h.QueuectlArgs("redrive", t0, "--id", "o-1", "--note", "T-1")...),
		append([]string{"queuectl"}, h.QueuectlArgs("investigate", t0, "--id", "o-1", "--note", "T-1")...),
		{"sender", "run-once", "--db", db, "--url", h.RefusedURL(), "--owner", "S", "--now-ms", fmt.Sprint(t0), "--json"},
	}
	why := "CONTRACT §2: the queue file is created only by `queuectl init`; every other program refuses a missing file " +
		"(exit 4): one that quietly makes an empty queue at a mistyped path reports on, or delivers from, a queue nobody fills"
	for _, r := range h.ExecAll(calls) {
		h.ExpectExit("`"+r.Short()+"` on a missing queue file", 4, r, why)
		h.Equal("…and prints nothing on stdout ("+r.Prog+" "+r.Args[0]+")", "", harness.Trim(r.Stdout),
			"CONTRACT §3, §6: a program that exits 2–11 prints nothing on stdout")
	}
	for _, suffix := range []string{"", "-journal", "-wal"} {
		_, err := os.Stat(db + suffix)
		h.Equal("no file "+filepath.Base(db+suffix)+" was created by the refused programs", "absent", harness.Presence(err), why)
	}

	h.Clause("§3.init.no-dir")
	dir := filepath.Join(h.Dir, "no-such-dir")
	h.UseQueue(filepath.Join("no-such-dir", "queue.db"))
	r := h.Queuectl("init", -1)
	whyDir := "CONTRACT §3, §6: init creates the file, not its directory: a missing directory is exit 4, so a mistyped path is an error, not a new tree"
	h.ExpectExit("`queuectl init` in a missing directory", 4, r, whyDir)
	h.Equal("…and prints nothing on stdout (init)", "", harness.Trim(r.Stdout), whyDir)
	_, err := os.Stat(dir)
	h.Equal("…and the directory was not created", "absent", harness.Presence(err), whyDir)
}

// flagsFirst: every flag is checked before the file is opened, so a bad
// value with a missing file is invalid input or usage (3, 2), never "missing"
// (4), and nothing is created (CONTRACT §3); and an error is one line on
// stderr, `queuectl: VERB: message`.
func flagsFirst(h *harness.Harness) {
	// §6.codes: a bad value with a missing file is both "invalid value" (3)
	// and "file missing" (4); the first row of the table wins.
	h.Clause("§3.flags-first", "§6.codes")
	h.UseQueue("also-never-made.db")
	db := h.DB
	cases := []struct {
		call harness.Call
		code int
	}{
		{harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "o-1", "--qty", "0"}}, 3},
		{harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "o-1", "--qty", "010"}}, 2},
		{harness.Call{Verb: "claim", Now: t0, Args: []string{"--owner", "A", "--lease-ms", "0"}}, 3},
		{harness.Call{Verb: "finish", Now: t0, Args: []string{"--id", "o-1", "--token", "1", "--outcome", "done"}}, 3},
		{harness.Call{Verb: "enqueue", Now: t0, Args: []string{"--id", "o 1", "--qty", "7"}}, 3},
		{harness.Call{Verb: "claim", Now: t0, Args: []string{"--owner", "A B"}}, 3},
		{harness.Call{Verb: "investigate", Now: t0, Args: []string{"--id", "o-1", "--note", "free text"}}, 3},
	}
	calls := make([]harness.Call, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	why := "CONTRACT §3: every flag is checked before the file is opened: the answer to a bad value is about the value, whatever the file"
	runs := h.Calls(calls)
	for i, c := range cases {
		what := c.call.Verb + " " + strings.Join(c.call.Args, " ")
		h.ExpectExit("`queuectl "+what+"` with a missing queue file", c.code, runs[i], why)
	}
	_, err := os.Stat(db)
	h.Equal("…and no queue file was created", "absent", harness.Presence(err), why)

	// The same bad flags on a file that is not a queue: 3 or 2 (the first
	// row), not 5, and the file is left byte for byte as it was.
	h.UseQueue("not-a-queue.txt")
	if err := h.WriteScratch(h.DB, []byte(strings.Repeat("a shopping list, not a queue\n", 50))); err != nil {
		h.Fatalf("the harness writes a text file", "the file is written", why, "%v", err)
	}
	var rs []harness.Refusal
	for _, c := range cases {
		rs = append(rs, harness.Refusal{What: strings.Join(c.call.Args, " ") + " on a text file", Call: c.call, Code: c.code, Why: why})
	}
	h.ExpectRefused(rs, nil)

	h.Clause("§3.stderr")
	whyErr := "CONTRACT §3: an error goes to stderr as one line `queuectl: VERB: message`, the line an operator's log and a cron mail show"
	for i, c := range cases {
		if c.code != 3 {
			continue // the usage errors' wording is left to each program's flag parser
		}
		e := runs[i].Stderr
		h.Check("`queuectl "+c.call.Verb+"` refused: stderr is one line `queuectl: "+c.call.Verb+": …`",
			strings.HasPrefix(e, "queuectl: "+c.call.Verb+": ") && strings.Count(strings.TrimSuffix(e, "\n"), "\n") == 0,
			"queuectl: "+c.call.Verb+": message", fmt.Sprintf("%q", harness.Trim(e)), whyErr)
	}
}

// helpTexts: each program's help names its flags and exits 0 (CONTRACT §3,
// §4, §5): help is for people, so only that much is judged.
func helpTexts(h *harness.Harness) {
	h.Clause("§3.help", "§4.help", "§5.help")
	type helpCase struct {
		clause string
		argv   []string
		flags  []string
	}
	cases := []helpCase{
		{"§3.help", []string{"queuectl", "help", "enqueue"}, []string{"id", "qty", "max-attempts", "deadline-ms"}},
		{"§3.help", []string{"queuectl", "claim", "-h"}, []string{"owner", "lease-ms"}},
		{"§4.help", []string{"sender", "--help"}, []string{"db", "url", "owner", "lease-ms", "now-ms", "timeout-ms", "busy-timeout-ms", "exit-after-receipt"}},
		{"§5.help", []string{"receiver", "-h"}, []string{"db", "addr", "fail-next", "reject-id", "loose-ack", "hold-next", "busy-timeout-ms"}},
	}
	cmds := make([][]string, len(cases))
	for i, c := range cases {
		cmds[i] = c.argv
	}
	for i, r := range h.ExecAll(cmds) {
		c := cases[i]
		h.Clause(c.clause)
		what := "`" + strings.Join(c.argv, " ") + "`"
		why := "CONTRACT " + strings.Split(c.clause, ".")[0] + ": the program's help lists its flags: a person reads the ranges there, not in the source"
		h.ExpectExit(what, 0, r, why)
		text := r.Stdout + r.Stderr
		var missing []string
		for _, f := range c.flags {
			if !strings.Contains(text, f) {
				missing = append(missing, f)
			}
		}
		obs := "none missing"
		if len(missing) > 0 {
			obs = "missing: " + strings.Join(missing, ", ")
		}
		h.Equal(what+" names every flag", "none missing", obs, why)
	}
}
