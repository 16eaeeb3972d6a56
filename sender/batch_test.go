package sender_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"snacklab/queue"
	"snacklab/sender"
)

// byID answers each order by its id: ok, 503, 422 or a loose ack.
func byID(answers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var o struct{ ID string }
		json.NewDecoder(r.Body).Decode(&o)
		switch answers[o.ID] {
		case "retry":
			reply(503, `{"ack":false,"error":"busy"}`)(w, r)
		case "permanent":
			reply(422, `{"ack":false,"error":"rejected"}`)(w, r)
		case "bad-ack":
			reply(200, `{"ack":1}`)(w, r)
		default:
			reply(200, `{"ack":true,"duplicate":false,"stock":7}`)(w, r)
		}
	}
}

// event is the part of an event line the tests read.
type event struct {
	Event   string
	ID      string
	Applied bool
	State   string
}

func events(t *testing.T, out string) []event {
	t.Helper()
	var es []event
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		es = append(es, e)
	}
	return es
}

// A batch: one claiming, a claimed per job in the claim's order, a response
// per job as it is delivered, then a finished per decided job after the one
// finish transaction. Each job ends as RunOnce would leave it; an undecided
// one stays leased and its error comes after the others are finished.
func TestRunBatchMixedOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[string]string
		wantErr error
		want    map[string]queue.State
	}{
		{"all ok", map[string]string{}, nil,
			map[string]queue.State{"o-1": queue.Done, "o-2": queue.Done, "o-3": queue.Done, "o-4": queue.Done}},
		{"ok, retry, permanent, bad ack", map[string]string{"o-2": "retry", "o-3": "permanent", "o-4": "bad-ack"}, sender.ErrBadAck,
			map[string]queue.State{"o-1": queue.Done, "o-2": queue.Pending, "o-3": queue.Dead, "o-4": queue.Leased}},
		{"bad ack first, the rest still finished", map[string]string{"o-1": "bad-ack", "o-3": "retry"}, sender.ErrBadAck,
			map[string]queue.State{"o-1": queue.Leased, "o-2": queue.Done, "o-3": queue.Pending, "o-4": queue.Done}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := openQueue(t, "o-1", "o-2", "o-3", "o-4")
			srv, n := countingServer(t, byID(tc.answers))
			var out bytes.Buffer
			s := newSender(q, srv.URL, &out)
			s.Batch = 8
			res, err := s.RunBatch(context.Background())
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("RunBatch error = %v, want %v", err, tc.wantErr)
			}
			if got, want := len(res), 4; got != want {
				t.Fatalf("%d results, want %d", got, want)
			}
			if got, want := n.Load(), int32(4); got != want {
				t.Errorf("%d POSTs, want %d", got, want)
			}
			var kinds, order []string
			for _, e := range events(t, out.String()) {
				kinds = append(kinds, e.Event)
				if e.Event != "claiming" {
					order = append(order, e.Event+" "+e.ID)
				}
			}
			decided := 4
			for _, a := range tc.answers {
				if a == "bad-ack" {
					decided--
				}
			}
			want := append([]string{"claiming"}, slices.Repeat([]string{"claimed"}, 4)...)
			want = append(want, slices.Repeat([]string{"response"}, 4)...)
			want = append(want, slices.Repeat([]string{"finished"}, decided)...)
			if !slices.Equal(kinds, want) {
				t.Errorf("events %v, want %v", kinds, want)
			}
			for i, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
				if got := order[i]; got != "claimed "+id {
					t.Errorf("event %d is %q, want claimed %s (the claim's order)", i+1, got, id)
				}
				if got := order[4+i]; got != "response "+id {
					t.Errorf("event %d is %q, want response %s (delivered in order)", i+5, got, id)
				}
				if got, want := getJob(t, q, id).State, tc.want[id]; got != want {
					t.Errorf("%s is %s, want %s", id, got, want)
				}
				// Each job's attempt is kept with its evidence, decided or not.
				h, err := q.Show(context.Background(), id)
				wantOutcome := map[string]queue.Outcome{"retry": queue.OutcomeRetry, "permanent": queue.OutcomePermanent,
					"bad-ack": queue.OutcomeUndecided, "": queue.OutcomeOK}[tc.answers[id]]
				if err != nil || len(h.Attempts) != 1 || h.Attempts[0].Outcome != wantOutcome || h.Attempts[0].Status == 0 {
					t.Errorf("%s attempts %+v (%v), want one %s with its status", id, h.Attempts, err, wantOutcome)
				}
			}
		})
	}
}

// The lease of a batch's first job runs out while the batch is delivered and
// another sender reclaims it: that job's finish is not applied (its
// `finished` says so) and changes nothing; the batch's other finishes apply.
func TestRunBatchStaleTokenMidBatch(t *testing.T) {
	q := openQueue(t, "o-1", "o-2", "o-3")
	ctx := context.Background()
	var stolen queue.Job
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"o-2"`) {
			// B, at the end of A's leases, reclaims the first of them.
			j, ok, err := q.Claim(ctx, "B", now+lease, lease)
			if err != nil || !ok {
				panic(fmt.Sprint("B's claim: ", ok, err))
			}
			stolen = j
		}
		reply(200, `{"ack":true}`)(w, r)
	})
	var out bytes.Buffer
	s := newSender(q, srv.URL, &out)
	s.Batch = 3
	res, err := s.RunBatch(ctx)
	if !errors.Is(err, sender.ErrStale) {
		t.Fatalf("RunBatch error = %v, want ErrStale", err)
	}
	if stolen.ID != "o-1" || stolen.Token != 2 {
		t.Fatalf("B reclaimed %s token %d, want o-1 token 2", stolen.ID, stolen.Token)
	}
	if got := getJob(t, q, "o-1"); got != stolen {
		t.Errorf("A's stale finish changed o-1: %+v, want B's grant %+v", got, stolen)
	}
	for i, want := range []bool{false, true, true} {
		if res[i].Applied != want {
			t.Errorf("%s applied = %v, want %v", res[i].Job.ID, res[i].Applied, want)
		}
	}
	var finished []event
	for _, e := range events(t, out.String()) {
		if e.Event == "finished" {
			finished = append(finished, e)
		}
	}
	want := []event{{"finished", "o-1", false, "leased"}, {"finished", "o-2", true, "done"}, {"finished", "o-3", true, "done"}}
	if !slices.Equal(finished, want) {
		t.Errorf("finished events %+v, want %+v", finished, want)
	}
}

// The crash switch fires after the batch's first response: nothing is
// finished and every job of the batch stays leased for its lease to run out.
func TestRunBatchExitAfterReceipt(t *testing.T) {
	q := openQueue(t, "o-1", "o-2", "o-3")
	srv, n := countingServer(t, reply(200, `{"ack":true}`))
	var out bytes.Buffer
	s := newSender(q, srv.URL, &out)
	s.Batch = 3
	s.ExitAfterReceipt = func() {}
	if _, err := s.RunBatch(context.Background()); !errors.Is(err, sender.ErrStoppedAfterReceipt) {
		t.Fatalf("RunBatch error = %v, want ErrStoppedAfterReceipt", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("%d POSTs, want 1", got)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if got := getJob(t, q, id).State; got != queue.Leased {
			t.Errorf("%s is %s, want leased", id, got)
		}
	}
	if got := eventKinds(t, out.String()); got[len(got)-1] != "response" {
		t.Errorf("last event %q, want response", got[len(got)-1])
	}
}

// Run with a batch size delivers every job, a batch at a time, then stops at
// the empty claim; with 0 or 1 it is RunOnce repeated, event for event.
func TestRunDeliversInBatches(t *testing.T) {
	ids := []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6", "o-7"}
	var single string
	for _, tc := range []struct {
		batch, claims int
	}{{0, 8}, {1, 8}, {3, 4}, {7, 2}, {100, 2}} {
		t.Run(fmt.Sprint(tc.batch), func(t *testing.T) {
			q := openQueue(t, ids...)
			srv, _ := countingServer(t, reply(200, `{"ack":true}`))
			var out bytes.Buffer
			s := newSender(q, srv.URL, &out)
			s.Batch = tc.batch
			n, err := s.Run(context.Background())
			if err != nil || n != len(ids) {
				t.Fatalf("Run = %d, %v; want %d jobs", n, err, len(ids))
			}
			count := map[string]int{}
			for _, k := range eventKinds(t, out.String()) {
				count[k]++
			}
			want := map[string]int{"claiming": tc.claims, "claimed": 7, "response": 7, "finished": 7, "empty": 1}
			if fmt.Sprint(count) != fmt.Sprint(want) {
				t.Errorf("events %v, want %v", count, want)
			}
			for _, id := range ids {
				if got := getJob(t, q, id).State; got != queue.Done {
					t.Errorf("%s is %s, want done", id, got)
				}
			}
			if tc.batch <= 1 {
				if single != "" && out.String() != single {
					t.Errorf("--batch %d printed\n%s\nwant what batch 0 printed\n%s", tc.batch, out.String(), single)
				}
				single = out.String()
			}
		})
	}
}
