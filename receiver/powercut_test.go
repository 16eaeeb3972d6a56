package receiver_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/internal/powercut"
	"snacklab/receiver"
)

// helperOrderEnv makes TestHelperOrder the process the power-cut test
// records: it opens the receiver file at this path, handles one POST
// /orders and prints the status it answered.
const helperOrderEnv = "SNACKLAB_RECEIVER_TEST_ORDER"

func TestHelperOrder(t *testing.T) {
	path := os.Getenv(helperOrderEnv)
	if path == "" {
		t.Skip("the process TestOrderSurvivesAPowerCut records")
	}
	rcv, err := receiver.Open(path, receiver.Options{Now: fixedNow})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := httptest.NewRecorder()
	rcv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(order("o-1", 7, 1))))
	fmt.Println("answered", w.Code)
	rcv.Close()
	os.Exit(0)
}

// Once a POST is answered 200, nothing its commit wrote, created or
// deleted may still be lost by a power cut: every write synced, and the
// journal's deletion synced to the directory (synchronous=EXTRA).
func TestOrderSurvivesAPowerCut(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "r.db")
	rcv, err := receiver.Open(path, receiver.Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	rcv.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p, err := powercut.Start([]string{exe, "-test.run=^TestHelperOrder$"}, powercut.Options{Root: root, Stdout: out,
		Env: append(os.Environ(), helperOrderEnv+"="+path)})
	if errors.Is(err, powercut.ErrNoPtrace) || errors.Is(err, syscall.EPERM) {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := p.Wait()
	if err != nil || rec.Code != 0 {
		t.Fatalf("the receiving process: %v, exit %d %s", err, rec.Code, rec.Signal)
	}
	m, err := powercut.NewModel(rec)
	if err != nil {
		t.Fatal(err)
	}
	answered := false
	for bi, b := range m.Barriers {
		for _, i := range b.Answers {
			answered = answered || strings.Contains(string(rec.Ops[i].Data), "answered 200")
		}
		if answered && len(b.InFlight) > 0 {
			op := rec.Ops[b.InFlight[0]]
			t.Fatalf("after the 200 %d operations can still be lost by a power cut, first #%d %s %s:\n%s",
				len(b.InFlight), b.InFlight[0], op.Call, op.Name, m.Picture(powercut.State{Barrier: bi, Fates: make([]powercut.Fate, len(b.InFlight))}))
		}
	}
	if !answered {
		t.Fatal("the recording has no 200 on stdout")
	}
}
