// Package maglev computes Maglev consistent-hashing lookup tables
// (Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
// Balancer", NSDI 2016), extended with weights. It is a pure function of
// the backends, the table size and the seed, so every node computes the
// same table for the same backends.
//
// Size the table at 100 slots per backend or more, as the paper advises:
// then removing one of N backends moves about 1/N of the slots besides its
// own. With fewer slots per backend, more move (e.g. about 5/N at 55).
package maglev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

const (
	// DefaultTableSize is the default number of slots, a prime.
	DefaultTableSize = 16381
	// MaxTableSize is the largest supported table size.
	MaxTableSize = 131071
)

// Backend is one entry to place in the table. Key identifies the backend
// across nodes and restarts (lbstate uses its L3n4Addr key); Weight is its
// relative share of the slots, and 0 gets none.
type Backend struct {
	Key    []byte
	Weight uint16
}

// ValidateTableSize reports whether m is a usable table size: a prime no
// larger than MaxTableSize.
func ValidateTableSize(m int) error {
	if m < 2 || m > MaxTableSize || !isPrime(m) {
		return fmt.Errorf("maglev table size %d: must be a prime between 2 and %d (e.g. 251, 1021, 4093, 16381, 65521, 131071)", m, MaxTableSize)
	}
	return nil
}

var errNoBackends = errors.New("maglev: no backend with a weight above 0")

// Compute fills a table of m slots with indices into backends and returns
// it. Each backend of weight w gets about w/Σw of the slots. The result
// does not depend on the order of backends, only on their keys, weights,
// m and seed. Keys must be distinct.
func Compute(backends []Backend, m int, seed uint32) ([]uint32, error) {
	table := make([]uint32, m)
	return table, Fill(table, backends, seed)
}

// Fill is Compute into a caller's table; len(table) is the table size.
func Fill(table []uint32, backends []Backend, seed uint32) error {
	m := len(table)
	if err := ValidateTableSize(m); err != nil {
		return err
	}
	// Visit backends in key order, so that callers' order does not matter.
	order := make([]int, 0, len(backends))
	var maxWeight uint32
	for i, b := range backends {
		if b.Weight > 0 {
			order = append(order, i)
			maxWeight = max(maxWeight, uint32(b.Weight))
		}
	}
	if len(order) == 0 {
		return errNoBackends
	}
	if len(order) > m {
		return fmt.Errorf("maglev: %d backends do not fit in a table of %d slots", len(order), m)
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(backends[a].Key, backends[b].Key) })
	for i := 1; i < len(order); i++ {
		if bytes.Equal(backends[order[i-1]].Key, backends[order[i]].Key) {
			return fmt.Errorf("maglev: duplicate backend key %x", backends[order[i]].Key)
		}
	}

	// Each backend walks its own permutation of the slots, offset + j*skip
	// (mod m), computed as it goes rather than materialised.
	type cursor struct {
		next, skip uint32
		weight     uint32
		credit     uint32
	}
	cursors := make([]cursor, len(order))
	for j, i := range order {
		offset, skip := permutation(backends[i].Key, seed, uint32(m))
		cursors[j] = cursor{next: offset, skip: skip, weight: uint32(backends[i].Weight)}
	}

	const empty = ^uint32(0)
	for i := range table {
		table[i] = empty
	}
	// In each round every backend earns credit equal to its weight and
	// takes one slot per maxWeight of credit, so that over the rounds the
	// slots divide in proportion to the weights.
	filled := 0
	for filled < m {
		for j := range cursors {
			c := &cursors[j]
			c.credit += c.weight
			for c.credit >= maxWeight && filled < m {
				c.credit -= maxWeight
				slot := c.next
				for table[slot] != empty {
					slot += c.skip
					if slot >= uint32(m) {
						slot -= uint32(m)
					}
				}
				table[slot] = uint32(order[j])
				filled++
				c.next = slot + c.skip
				if c.next >= uint32(m) {
					c.next -= uint32(m)
				}
			}
		}
	}
	return nil
}

// permutation returns a backend's starting slot and step, as in the paper:
// offset = h1 mod m, skip = h2 mod (m-1) + 1, from one 128-bit FNV-1a hash
// of the seed and the key.
func permutation(key []byte, seed uint32, m uint32) (offset, skip uint32) {
	h := fnv.New128a()
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], seed)
	h.Write(s[:])
	h.Write(key)
	var sum [16]byte
	h.Sum(sum[:0])
	h1 := binary.BigEndian.Uint64(sum[:8])
	h2 := binary.BigEndian.Uint64(sum[8:])
	return uint32(h1 % uint64(m)), uint32(h2%uint64(m-1)) + 1
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
