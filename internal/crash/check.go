package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"

	_ "modernc.org/sqlite" // integrity_check on both files
)

// Invariants, by the name a report gives them.
const (
	InvAccepted  = "accepted-exists-once"     // every accepted order exists once, with its qty, and ends done
	InvStock     = "stock-matches-orders"     // stock = Σ qty of distinct received orders; each order's qty = its job's
	InvReceived  = "done-was-received"        // every done job's order was received
	InvTokens    = "tokens-unique-increasing" // no (id, token) granted twice, no token decreases
	InvRedrive   = "redrive-audited-once"     // a redrive that returned 0 has exactly one audit row, a refused one none
	InvIntegrity = "integrity-check"          // PRAGMA integrity_check is ok on both files
	InvLeases    = "no-lease-left"            // after the drain no job is leased past its lease
	InvFields    = "state-fields"             // owner and lease only in leased, reason exactly when dead (CONTRACT §2)
	InvDurable   = "durable-before-reported"  // acceptance and finish reported only after their commit reached the disk
	InvAtomic    = "killed-op-atomic"         // a killed operation leaves the state before or after it, never a third
	InvDrain     = "drain-completes"          // the story's restarts bring every accepted job to done
	InvRestart   = "restart-works"            // the programs start again on the files a crash left
)

// InvariantClauses maps each invariant, and the power cut's InvAnswered, to
// the CONTRACT.md clauses it judges: a violation breaks one of them. The
// clause registry (labsteps/clauses) counts these as checks of the clauses.
var InvariantClauses = map[string][]string{
	InvAccepted:  {"§2.enqueue.durable", "§2.state.keep"},
	InvStock:     {"§5.new", "§5.dup"},
	InvReceived:  {"§4.class.ok"},
	InvTokens:    {"§2.claim.grant", "§2.redrive.token"},
	InvRedrive:   {"§2.redrive.atomic", "§2.redrive.audit"},
	InvIntegrity: {"§2.atomic"},
	InvLeases:    {"§2.claim.expiry"},
	InvFields:    {"§2.state.owner-lease", "§2.state.reason"},
	InvDurable:   {"§2.enqueue.durable", "§2.durable"},
	InvAtomic:    {"§2.atomic", "§4.batch.claim", "§4.batch.finish"},
	InvDrain:     {"§2.claim.expiry", "§2.claim.due"},
	InvRestart:   {"§2.atomic", "§3.read-only.hot-journal"},
	InvAnswered:  {"§2.enqueue.durable", "§2.durable", "§5.durable"},
}

// Violation is one invariant broken after one crash point.
type Violation struct {
	Program   string `json:"program"`
	Call      string `json:"call"` // "fsync q.db-journal"; the report call for InvDurable
	N         int    `json:"n"`    // the crash point; 0 for a run that was not killed
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
	Replay    string `json:"replay"`
}

// job is the part of CONTRACT §3's JOB the checks read.
type job struct {
	ID         string  `json:"id"`
	Qty        int64   `json:"qty"`
	State      string  `json:"state"`
	Reason     *string `json:"reason"`
	Token      int64   `json:"token"`
	Owner      *string `json:"owner"`
	LeaseUntil *int64  `json:"lease_until"`
}

type shown struct {
	Job      job               `json:"job"`
	Redrives []json.RawMessage `json:"redrives"`
}

// check judges the world after its drain; now is the drain's last instant.
// The receiver must still be up (its HTTP API is how its effects are read);
// check stops it before the integrity checks.
func (w *world) check(now int64) []vio {
	var out []vio
	bad := func(inv, format string, args ...any) { out = append(out, vio{inv, fmt.Sprintf(format, args...)}) }

	ids := w.orderIDs()
	jobs := w.showJobs(now, ids, bad)
	w.checkAccepted(jobs, bad)
	w.checkReceiver(ids, jobs, bad)
	w.checkTokens(jobs, bad)
	w.checkJobs(jobs, now, bad)

	if w.recv != nil {
		w.recv.stop()
	}
	for _, f := range []string{w.q, w.r} {
		if err := w.integrity(f); err != nil {
			bad(InvIntegrity, "%s: %v", f, err)
		}
	}
	return out
}

// violated records that invariant inv is broken, and how.
type violated func(inv, format string, args ...any)

// orderIDs is every order the world saw: accepted by an enqueue, or
// granted to a sender.
func (w *world) orderIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range w.accepted {
		ids[id] = true
	}
	for _, g := range w.grants {
		ids[g.ID] = true
	}
	return ids
}

// showJobs reads each of ids from the queue (`queuectl show`); an accepted
// order it cannot find is a violation.
func (w *world) showJobs(now int64, ids map[string]bool, bad violated) map[string]shown {
	jobs := map[string]shown{}
	for _, id := range sortedKeys(ids) {
		r := w.queuectl("show", now, "--id", id)
		var s shown
		if r.Code != 0 || json.Unmarshal([]byte(firstLine(r.Stdout)), &s) != nil {
			if _, ok := w.accepted[id]; ok {
				bad(InvAccepted, "order %s was accepted (enqueue printed it) but `queuectl show --id %s` finds no job: %s %s", id, id, r, firstLine(r.Stderr))
			}
			continue
		}
		jobs[id] = s
	}
	return jobs
}

// checkAccepted: every accepted order is in the queue with its qty, done.
func (w *world) checkAccepted(jobs map[string]shown, bad violated) {
	for id, q := range w.accepted {
		s, ok := jobs[id]
		if !ok {
			continue
		}
		if s.Job.Qty != q {
			bad(InvAccepted, "order %s was accepted with qty %d, the queue holds qty %d", id, q, s.Job.Qty)
		}
		if s.Job.State != "done" {
			bad(InvDrain, "order %s is %s after the drain, want done", id, s.Job.State)
		}
	}
}

// checkReceiver judges the receiver's side, through its HTTP API: every
// done job's order was received, with its job's qty, and the stock is the
// sum of the orders' qty.
func (w *world) checkReceiver(ids map[string]bool, jobs map[string]shown, bad violated) {
	var stock struct {
		Stock    int64            `json:"stock"`
		Orders   int64            `json:"orders"`
		Requests map[string]int64 `json:"requests"`
	}
	if w.recv == nil || !w.recv.alive() {
		bad(InvRestart, "no receiver running to ask for its stock")
		return
	}
	if _, err := getJSON(w.recv.URL, "/stock", &stock); err != nil {
		bad(InvRestart, "GET /stock: %v", err)
		return
	}
	var sum, orders int64
	for _, id := range sortedKeys(ids) {
		var o struct {
			ID  string `json:"id"`
			Qty int64  `json:"qty"`
		}
		found, err := getJSON(w.recv.URL, "/orders/"+url.PathEscape(id), &o)
		if err != nil {
			bad(InvRestart, "GET /orders/%s: %v", id, err)
			continue
		}
		s, known := jobs[id]
		if !found {
			if known && s.Job.State == "done" {
				bad(InvReceived, "job %s is done but the receiver has no order %s", id, id)
			}
			continue
		}
		orders++
		sum += o.Qty
		if known && o.Qty != s.Job.Qty {
			bad(InvStock, "order %s has qty %d at the receiver, its job qty %d", id, o.Qty, s.Job.Qty)
		}
	}
	if stock.Stock != sum || stock.Orders != orders {
		bad(InvStock, "the receiver's stock is %d over %d orders; its orders' qty sum to %d over %d orders: an order was recorded without its stock (or the reverse)",
			stock.Stock, stock.Orders, sum, orders)
	}
}

// checkTokens judges every grant seen, in the order of the injected clock
// (each process has its own instant; processes end in another order): no
// token granted twice, none lower than one granted before, and no job
// holding less than it was granted.
func (w *world) checkTokens(jobs map[string]shown, bad violated) {
	grants := append([]grant(nil), w.grants...)
	sort.SliceStable(grants, func(i, j int) bool { return grants[i].At < grants[j].At })
	seen := map[grant]bool{}
	last := map[string]int64{}
	for _, g := range grants {
		k := grant{ID: g.ID, Token: g.Token}
		if seen[k] {
			bad(InvTokens, "job %s token %d was granted twice (again to %s)", g.ID, g.Token, g.By)
		}
		seen[k] = true
		if prev, ok := last[g.ID]; ok && g.Token < prev {
			bad(InvTokens, "job %s was granted token %d at %d, after token %d", g.ID, g.Token, g.At, prev)
		}
		last[g.ID] = max(last[g.ID], g.Token)
	}
	for id, t := range last {
		if s, ok := jobs[id]; ok && s.Job.Token < t {
			bad(InvTokens, "job %s holds token %d, lower than the %d already granted", id, s.Job.Token, t)
		}
	}
}

// checkJobs judges each job's redrive audit rows and state fields, and
// that no lease outlived the drain.
func (w *world) checkJobs(jobs map[string]shown, now int64, bad violated) {
	for id, s := range jobs {
		okN, killed, rows := w.redriveOK[id], w.redriveKilled[id], len(s.Redrives)
		if rows < okN || rows > okN+killed {
			want := fmt.Sprint(okN)
			if killed > 0 {
				want = fmt.Sprintf("%d to %d (%d killed)", okN, okN+killed, killed)
			}
			bad(InvRedrive, "job %s has %d redrive audit rows; %d redrive(s) returned 0, so want %s", id, rows, okN, want)
		}
		j := s.Job
		leased := j.State == "leased"
		if (j.Owner != nil) != leased || (j.LeaseUntil != nil) != leased {
			bad(InvFields, "job %s is %s with owner %v and lease_until %v: both are set only while leased", id, j.State, deref(j.Owner), deref(j.LeaseUntil))
		}
		if (j.Reason != nil) != (j.State == "dead") {
			bad(InvFields, "job %s is %s with reason %v: a reason is set exactly when dead", id, j.State, deref(j.Reason))
		}
		if leased && j.LeaseUntil != nil && *j.LeaseUntil <= now {
			bad(InvLeases, "job %s is still leased to %v until %d, at %d after the drain", id, deref(j.Owner), *j.LeaseUntil, now)
		}
	}
}

type vio struct{ inv, detail string }

func deref[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// integrity runs PRAGMA integrity_check on a SQLite file (opening it
// read-write, as a restarted program would, so a hot journal is rolled back
// first), as the judged when there is one: the file, its journal and any
// link a program left at their names are opened with the programs' rights,
// never the lab's (harness.SQLHand).
func (w *world) integrity(path string) error {
	ctx := context.WithoutCancel(w.ctx)
	abs, _ := filepath.Abs(path)
	hand, err := w.judged.OpenSQL(ctx, "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer hand.Close()
	res, err := hand.Value(ctx, "PRAGMA integrity_check")
	if err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("integrity_check: %s", res)
	}
	return nil
}
