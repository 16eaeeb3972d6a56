package sender_test

import (
	"testing"

	"snacklab/sender"
)

// TestOrdersURLAppendsToPath: /orders goes on the base URL's path, never
// on its query (CONTRACT §4.url).
func TestOrdersURLAppendsToPath(t *testing.T) {
	for _, tt := range []struct{ base, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/orders"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/orders"},
		{"http://h/api/v1", "http://h/api/v1/orders"},
		{"http://h/api?k=v", "http://h/api/orders?k=v"},
		{"http://h?k=v", "http://h/orders?k=v"},
		{"http://h/api/?k=v#frag", "http://h/api/orders?k=v"},
		{"http://h/a%2Fb", "http://h/a%2Fb/orders"},
	} {
		got, err := sender.OrdersURL(tt.base)
		if err != nil {
			t.Fatalf("OrdersURL(%q): %v", tt.base, err)
		}
		if got != tt.want {
			t.Errorf("OrdersURL(%q)=%q, want %q", tt.base, got, tt.want)
		}
	}
}
