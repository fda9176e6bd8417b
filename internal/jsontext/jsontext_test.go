package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// String and Strings write what json.Marshal writes, escapes and all.
func TestStringsAsMarshalled(t *testing.T) {
	cases := []string{"", "active", `a"b`, `a\b`, "<", "<&>", "tab\there", "é", "\xff", "\u2028"}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := String(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
	for _, ss := range [][]string{nil, {}, cases} {
		want, _ := json.Marshal(ss)
		if got := Strings(nil, ss); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", ss, got, want)
		}
	}
}
