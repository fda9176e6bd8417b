package tables

import (
	"testing"

	"github.com/cilium/statedb/index"
)

// keySetOf keeps every key, in order, for no key, one and several: a
// non-unique index finds a row by each of them.
func TestKeySetOfKeepsEveryKeyInOrder(t *testing.T) {
	for _, keys := range [][]index.Key{
		nil,
		{index.String("a")},
		{index.String("a"), index.String("b"), index.String("c")},
	} {
		var got []string
		keySetOf(keys).Foreach(func(k index.Key) { got = append(got, string(k)) })
		if len(got) != len(keys) {
			t.Fatalf("%d keys: the set has %q", len(keys), got)
		}
		for i, k := range keys {
			if got[i] != string(k) {
				t.Errorf("%d keys: key %d is %q, want %q", len(keys), i, got[i], k)
			}
		}
	}
}
