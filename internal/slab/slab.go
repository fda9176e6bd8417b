// Package slab carves small immutable byte strings (index keys, names)
// from shared blocks: one heap object for several where each was one,
// for what every row of the tables keeps.
//
// The price: a block lives as long as its longest-lived piece, so after
// a mass delete that spares a few rows each may keep up to BlockSize
// bytes where it kept 16 or 24; rows written together (a sync, a batch)
// die together often enough that this stays small next to the rows
// themselves.
package slab

import (
	"sync"
	"unsafe"
)

// BlockSize is the size of the blocks: seven IPv4 address keys (9 bytes)
// or four service names of up to 16 bytes share one 64-byte allocation.
const BlockSize = 64

// A Slab hands out copies carved from its current block. Its zero value
// is ready to use, and it is safe for concurrent use. Copies must never
// be written to: they share their block with others.
type Slab struct {
	mu  sync.Mutex
	buf []byte
}

// Bytes returns a copy of b whose capacity ends where it does, so that
// an append to it cannot write over the next copy. A b longer than half
// a block gets an allocation of its own.
func (s *Slab) Bytes(b []byte) []byte {
	if len(b) > BlockSize/2 {
		return append([]byte(nil), b...)
	}
	if len(b) == 0 {
		return []byte{}
	}
	s.mu.Lock()
	if cap(s.buf)-len(s.buf) < len(b) {
		s.buf = make([]byte, 0, BlockSize)
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	out := s.buf[n:len(s.buf):len(s.buf)]
	s.mu.Unlock()
	return out
}

// String returns a copy of str, carved as Bytes are.
func (s *Slab) String(str string) string {
	if str == "" {
		return ""
	}
	b := s.Bytes(unsafe.Slice(unsafe.StringData(str), len(str)))
	return unsafe.String(&b[0], len(b))
}
