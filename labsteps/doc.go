// Package labsteps is snacklab's lab: eight numbered steps that launch an
// implementation's three executables (queuectl, sender, receiver) as real OS
// processes in a fresh directory and judge them only through CONTRACT.md.
//
// A Harness owns the world of one step: its work directory, the bin directory
// under test, the processes it started, their logs, a narrated log and a
// timeline of events. Its verbs are the events of the story (StartReceiver,
// Enqueue, Claim, RunSender, KillA, HoldWriteLock…) and its checks say what
// was expected, what was observed and why it matters. A failed check ends the
// step, like t.Fatalf, and names the directory that keeps the logs.
//
// Every boundary goes through the injected clock (--now-ms), and every wait is
// a handshake or deadline-bounded polling: nothing here sleeps to let another
// process "get there first". Nothing here imports snacklab's own packages
// either: expected values are computed from the contract's formulas, so the
// same steps grade any implementation of the contract.
package labsteps
