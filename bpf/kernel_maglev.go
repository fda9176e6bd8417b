package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// kernelMaglev is lb_maglev in the kernel: a hash of maps whose inner
// maps are arrays with one element, a whole Maglev table. Inner maps are
// not pinned: each lives while the outer map refers to it.
type kernelMaglev struct {
	outer *ebpf.Map
	name  string
	// inner is the spec of the inner maps, sized for the table.
	inner *ebpf.MapSpec
	size  int
}

func (m *kernelMaglev) Name() string   { return m.name }
func (m *kernelMaglev) TableSize() int { return m.size }

// Update writes the table into a new inner map and swaps it in, so that
// the datapath sees the old table or the new one.
func (m *kernelMaglev) Update(id uint32, table []uint32) error {
	if len(table) != m.size {
		return fmt.Errorf("%s: update %d: table has %d slots, want %d", m.name, id, len(table), m.size)
	}
	inner, err := ebpf.NewMap(m.inner)
	if err != nil {
		return fmt.Errorf("%s: update %d: new inner map: %w", m.name, id, err)
	}
	defer inner.Close()
	if err := inner.Update(uint32(0), table, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: update %d: fill inner map: %w", m.name, id, err)
	}
	if err := m.outer.Update(id, inner, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return &MapFullError{Map: m.name, Op: fmt.Sprintf("update %d", id), MaxEntries: int(m.outer.MaxEntries()), Err: err}
		}
		return fmt.Errorf("%s: update %d: %w", m.name, id, err)
	}
	return nil
}

func (m *kernelMaglev) Delete(id uint32) error {
	if err := m.outer.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%s: delete %d: %w", m.name, id, err)
	}
	return nil
}

// Lookup reads a frontend's table. A concurrent Update may free the inner
// map between reading its ID and opening it; then the lookup starts over.
func (m *kernelMaglev) Lookup(id uint32) ([]uint32, bool, error) {
	for attempt := 0; ; attempt++ {
		var innerID uint32
		err := m.outer.Lookup(id, &innerID)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: lookup %d: %w", m.name, id, err)
		}
		table, err := m.readInner(innerID)
		if err == nil {
			return table, true, nil
		}
		if !errors.Is(err, os.ErrNotExist) || attempt == 10 {
			return nil, false, fmt.Errorf("%s: lookup %d: %w", m.name, id, err)
		}
	}
}

func (m *kernelMaglev) readInner(innerID uint32) ([]uint32, error) {
	inner, err := ebpf.NewMapFromID(ebpf.MapID(innerID))
	if err != nil {
		return nil, err
	}
	defer inner.Close()
	raw, err := inner.LookupBytes(uint32(0))
	if err != nil {
		return nil, err
	}
	table := make([]uint32, len(raw)/4)
	for i := range table {
		table[i] = binary.NativeEndian.Uint32(raw[4*i:])
	}
	return table, nil
}

func (m *kernelMaglev) Iterate(fn func(uint32, []uint32) bool) error {
	var id, innerID uint32
	it := m.outer.Iterate()
	for it.Next(&id, &innerID) {
		table, ok, err := m.Lookup(id) // by key: the table may have been swapped
		if err != nil {
			return fmt.Errorf("%s: iterate: %w", m.name, err)
		}
		if !ok {
			continue // deleted meanwhile
		}
		if !fn(id, table) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: iterate: %w", m.name, err)
	}
	return nil
}
