package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// DeleteStale deletes from m the keys a walk of it judged stale, each in
// one step with the read of the value it held (LookupAndDelete), and
// writes back an entry whose value stale no longer calls stale: one the
// datapath wrote anew after the walk (a new flow on an expired flow's
// tuple, a pin made again), unless the datapath wrote the key once more
// meanwhile, whose entry stays. It returns how many entries it deleted
// for good.
//
// A read and a delete in two steps, or all the deletes in one batch after
// all the reads, would delete a write that came between them: the
// datapath's entry would be gone with no trace (a flow's replies passed
// untranslated and its next packet balanced anew). Here only a packet in
// the microseconds between the delete and the write back misses the
// entry. A map without LookupAndDelete (Linux before 5.14, or a
// wrapper that does not pass it on) is read, and each stale key deleted
// at once after its read; a write between the two is lost.
func DeleteStale[K comparable, V any](m Map[K, V], keys []K, stale func(K, V) bool) (int, error) {
	deleted := 0
	for i, k := range keys {
		v, held, err := LookupAndDelete(m, k)
		if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, ebpf.ErrNotSupported) {
			n, err := deleteEachStale(m, keys[i:], stale)
			return deleted + n, err
		}
		if err != nil {
			return deleted, err
		}
		if !held {
			continue
		}
		if stale(k, v) {
			deleted++
			continue
		}
		if _, err := CreateEntry(m, k, v); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// LookupAndDelete deletes k from m in one step with the read of the value
// it held, if m can (kernel maps, Linux 5.14+; in-memory maps; wrappers
// that pass it on): else it returns errors.ErrUnsupported.
func LookupAndDelete[K comparable, V any](m Map[K, V], k K) (V, bool, error) {
	if d, ok := m.(interface {
		LookupAndDelete(K) (V, bool, error)
	}); ok {
		return d.LookupAndDelete(k)
	}
	var v V
	return v, false, fmt.Errorf("%s: lookup and delete: %w", m.Name(), errors.ErrUnsupported)
}

// deleteEachStale reads each key and deletes it at once if stale.
func deleteEachStale[K comparable, V any](m Map[K, V], keys []K, stale func(K, V) bool) (int, error) {
	deleted := 0
	for _, k := range keys {
		v, held, err := m.Lookup(k)
		if err != nil {
			return deleted, err
		}
		if !held || !stale(k, v) {
			continue
		}
		if err := m.Delete(k); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// CreateEntry adds k, v unless the map holds k: an entry the datapath
// wrote since stays. False if k was there.
func CreateEntry[K comparable, V any](m Map[K, V], k K, v V) (bool, error) {
	if c, ok := m.(interface{ Create(K, V) error }); ok {
		err := c.Create(k, v)
		if errors.Is(err, ErrExists) {
			return false, nil
		}
		return err == nil, err
	}
	// A map only this process writes (in memory).
	if _, ok, err := m.Lookup(k); err != nil || ok {
		return false, err
	}
	return true, m.Update(k, v)
}
