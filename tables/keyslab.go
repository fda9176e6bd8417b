package tables

import (
	"sync"

	"github.com/lbstate/lbstate/lb"
)

// keySlabSize is the size of the blocks a keySlab carves keys from: seven
// IPv4 address keys (9 bytes) or three IPv6 ones (21) share one 64-byte
// allocation, where each was one of 16 or 24 bytes.
const keySlabSize = 64

// keySlab hands out copies of index keys carved from shared blocks, for
// the keys the primary indexes of frontends and backends keep: one heap
// object per row less (two per service), and 9 bytes a key instead of
// 16. StateDB never mutates a key, and each copy's capacity ends where
// it does, so neighbours cannot write over each other.
//
// The price: a block lives as long as its longest-lived key, so after a
// mass delete that spares a few rows each may keep up to keySlabSize
// bytes where it kept 16 (or 24); rows written together (a sync, a
// batch) die together often enough that this stays small next to the
// rows themselves.
type keySlab struct {
	mu  sync.Mutex
	buf []byte
}

// clone returns a copy of k, carved from the current block.
func (s *keySlab) clone(k []byte) []byte {
	if len(k) > keySlabSize/2 {
		return append([]byte(nil), k...)
	}
	s.mu.Lock()
	if cap(s.buf)-len(s.buf) < len(k) {
		s.buf = make([]byte, 0, keySlabSize)
	}
	n := len(s.buf)
	s.buf = append(s.buf, k...)
	out := s.buf[n:len(s.buf):len(s.buf)]
	s.mu.Unlock()
	return out
}

// rowKeys holds the keys of the frontends' and backends' primary indexes.
var rowKeys keySlab

// storedAddrKey is addrKey for a key an index keeps with its row.
func storedAddrKey(a lb.L3n4Addr) []byte {
	var buf addrKeyBuf
	return rowKeys.clone(buf.key(a))
}
