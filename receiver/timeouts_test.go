package receiver_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"snacklab/receiver"
)

// short are bounds small enough for a test; the product's are in
// receiver.DefaultTimeouts.
var short = receiver.Timeouts{
	ReadHeader: 300 * time.Millisecond,
	Read:       400 * time.Millisecond,
	Write:      400 * time.Millisecond,
	Idle:       400 * time.Millisecond,
	MaxHeader:  1 << 10,
}

// serve starts a receiver with the short bounds and returns its address.
func serve(t *testing.T, faults receiver.Faults) string {
	t.Helper()
	rcv, err := receiver.Open(filepath.Join(t.TempDir(), "r.db"), receiver.Options{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rcv.Server(nil, short)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); rcv.Close() })
	return ln.Addr().String()
}

// closedWithin reads from conn until the server closes it or within
// passes; it returns what was read and whether the server closed it.
func closedWithin(t *testing.T, conn net.Conn, within time.Duration) (string, bool) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), false
	}
	return string(b), true
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestSlowClientsAreCut(t *testing.T) {
	addr := serve(t, receiver.Faults{})
	// Generous against a loaded machine, yet far below "forever".
	const within = 20 * time.Second

	t.Run("a body that never ends", func(t *testing.T) {
		conn := dial(t, addr)
		io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"id\":")
		if _, closed := closedWithin(t, conn, within); !closed {
			t.Fatalf("a body stalled after 6 of 40 bytes still held the connection after %v; want it cut after the read bound %v", within, short.Read)
		}
	})
	t.Run("headers that never end", func(t *testing.T) {
		conn := dial(t, addr)
		io.WriteString(conn, "GET /stock HTTP/1.1\r\nHost: x\r\n")
		if _, closed := closedWithin(t, conn, within); !closed {
			t.Fatalf("unfinished headers still held the connection after %v; want it cut after %v", within, short.ReadHeader)
		}
	})
	t.Run("an idle keep-alive connection", func(t *testing.T) {
		conn := dial(t, addr)
		io.WriteString(conn, "GET /stock HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /stock = %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
		if _, closed := closedWithin(t, conn, within); !closed {
			t.Fatalf("an idle keep-alive connection was still open after %v; want it closed after %v", within, short.Idle)
		}
	})
	// The limit is exact: net/http's own allows 4 KiB more.
	for _, c := range []struct {
		name string
		pad  int
		want int
	}{
		{"headers of exactly the limit", 0, http.StatusOK},
		{"headers one byte over the limit", 1, http.StatusRequestHeaderFieldsTooLarge},
		{"headers 3 KiB over the limit", 3 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := "GET /stock HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n"
			pad := strings.Repeat("a", short.MaxHeader-len(head)+c.pad)
			conn := dial(t, addr)
			io.WriteString(conn, "GET /stock HTTP/1.1\r\nHost: x\r\nX-Pad: "+pad+"\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != c.want {
				t.Fatalf("%d bytes of headers (limit %d) = %v, %v; want %d", len(head)+len(pad), short.MaxHeader, resp, err, c.want)
			}
			resp.Body.Close()
		})
	}
	t.Run("headers too large", func(t *testing.T) {
		conn := dial(t, addr)
		io.WriteString(conn, "GET /stock HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("8 KiB of headers = %v, %v; want 431", resp, err)
		}
	})
}

func TestHeldAnswerOutlivesTheBounds(t *testing.T) {
	addr := serve(t, receiver.Faults{HoldNext: 1})
	conn := dial(t, addr)
	body := `{"id":"o-1","qty":7,"token":1}`
	io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
	// A lower bound only: held for longer than every bound together, the
	// connection must still be open and unanswered.
	hold := 2 * (short.ReadHeader + short.Read + short.Write + short.Idle)
	if got, closed := closedWithin(t, conn, hold); closed || got != "" {
		t.Fatalf("held answer: closed=%v after reading %q within %v; want the connection held open, unanswered", closed, got, hold)
	}
	resp, err := http.Get("http://" + addr + "/orders/o-1")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /orders/o-1 = %v, %v; want 200: the held order is committed", resp, err)
	}
	resp.Body.Close()
}
