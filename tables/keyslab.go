package tables

import (
	"github.com/lbstate/lbstate/internal/slab"
	"github.com/lbstate/lbstate/lb"
)

// rowKeys holds the keys the primary indexes of frontends and backends
// keep with their rows: one heap object per row less (two per service),
// and 9 bytes an IPv4 key instead of 16. StateDB never mutates a key.
var rowKeys slab.Slab

// storedAddrKey is addrKey for a key an index keeps with its row.
func storedAddrKey(a lb.L3n4Addr) []byte {
	var buf addrKeyBuf
	return rowKeys.Bytes(buf.key(a))
}
