package reconciler_test

// An exact checker of the write order: it sees every write the reconciler
// makes to lb_services, lb_backends and lb_maglev, in the order it makes
// them, and checks after each entry what a datapath reading right then
// relies on. checkMaps reads the maps from another goroutine and must
// allow for what changed between its reads (a backend that came back);
// this one has no such leeway, so a violation that is repaired soon
// after cannot hide from it.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// writeOrder is the model of the three maps that the writes build.
type writeOrder struct {
	mu       sync.Mutex
	real     *bpf.Maps
	services map[bpf.ServiceKey]bpf.ServiceValue
	backends map[uint32]bool
	tables   map[uint32][]uint32
	refs     map[uint32]int // slots and table elements naming each backend
	seen     []string       // the violations, the first few
}

// checkWriteOrder returns maps whose lb_services, lb_backends and
// lb_maglev writes go through w, which starts from what they hold.
func checkWriteOrder(maps *bpf.Maps) (*bpf.Maps, *writeOrder) {
	w := &writeOrder{real: maps}
	w.resync()
	wrapped := *maps
	wrapped.Services = &orderedServices{Map: maps.Services, w: w}
	wrapped.Backends = &orderedBackends{Map: maps.Backends, w: w}
	wrapped.Maglev = &orderedMaglev{MaglevMap: maps.Maglev, w: w}
	return &wrapped, w
}

// violations returns what the writes broke.
func (w *writeOrder) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func (w *writeOrder) report(format string, args ...any) {
	if len(w.seen) < 10 {
		w.seen = append(w.seen, fmt.Sprintf(format, args...))
	}
}

// resync reads the model from the maps: at the start, and after a failed
// write, which may have applied a prefix of its entries.
func (w *writeOrder) resync() {
	w.services, w.backends, w.tables, w.refs = map[bpf.ServiceKey]bpf.ServiceValue{}, map[uint32]bool{}, map[uint32][]uint32{}, map[uint32]int{}
	w.real.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		w.services[k] = v
		for _, id := range namedBy(k, v) {
			w.refs[id]++
		}
		return true
	})
	w.real.Backends.Iterate(func(id uint32, _ bpf.Backend) bool { w.backends[id] = true; return true })
	w.real.Maglev.Iterate(func(id uint32, table []uint32) bool {
		w.tables[id] = slices.Clone(table)
		for _, b := range table {
			w.refs[b]++
		}
		return true
	})
}

// namedBy returns the backend IDs an lb_services entry names: a slot
// entry's, or the inline slots of a master.
func namedBy(k bpf.ServiceKey, v bpf.ServiceValue) []uint32 {
	if k.Slot > 0 {
		return []uint32{v.BackendID}
	}
	return v.Inline()
}

func (w *writeOrder) updateService(k bpf.ServiceKey, v bpf.ServiceValue) {
	if old, ok := w.services[k]; ok {
		for _, id := range namedBy(k, old) {
			w.refs[id]--
		}
	}
	w.services[k] = v
	if k.Slot == 0 {
		for s, id := range v.Inline() {
			w.refs[id]++
			if id != bpf.BackendReject && !w.backends[id] {
				w.report("slot %d of %s was written naming backend %d, which is not in lb_backends", s+1, k.L3n4Addr(), id)
			}
		}
		for s := bpf.InlineSlots + 1; s <= int(v.Count)+int(v.Standby)+int(v.Fallback); s++ {
			sk := k
			sk.Slot = uint16(s)
			if _, ok := w.services[sk]; !ok {
				w.report("the master of %s was written counting slot %d, which is not there", k.L3n4Addr(), s)
				break
			}
		}
		return
	}
	w.refs[v.BackendID]++
	if v.BackendID != bpf.BackendReject && !w.backends[v.BackendID] {
		w.report("slot %d of %s was written naming backend %d, which is not in lb_backends", k.Slot, k.L3n4Addr(), v.BackendID)
	}
}

func (w *writeOrder) deleteService(k bpf.ServiceKey) {
	old, ok := w.services[k]
	if !ok {
		return
	}
	delete(w.services, k)
	for _, id := range namedBy(k, old) {
		w.refs[id]--
	}
	if k.Slot == 0 {
		return
	}
	mk := k
	mk.Slot = 0
	if m, ok := w.services[mk]; ok && int(k.Slot) <= int(m.Count)+int(m.Standby)+int(m.Fallback) {
		w.report("slot %d of %s was deleted while its master counts it", k.Slot, k.L3n4Addr())
	}
}

func (w *writeOrder) deleteBackend(id uint32) {
	delete(w.backends, id)
	if w.refs[id] > 0 {
		w.report("backend %d was deleted while %d slots or Maglev elements name it", id, w.refs[id])
	}
}

func (w *writeOrder) updateTable(id uint32, table []uint32) {
	for _, b := range w.tables[id] {
		w.refs[b]--
	}
	w.tables[id] = slices.Clone(table) // the caller's buffer
	for _, b := range table {
		w.refs[b]++
	}
	for _, b := range table {
		if b != bpf.BackendReject && !w.backends[b] {
			w.report("Maglev table %d was written naming backend %d, which is not in lb_backends", id, b)
			return
		}
	}
}

func (w *writeOrder) deleteTable(id uint32) {
	for _, b := range w.tables[id] {
		w.refs[b]--
	}
	delete(w.tables, id)
}

// apply runs a write and then, entry by entry, its effect on the model;
// after a failure it reads the model from the maps again.
func (w *writeOrder) apply(write func() error, effect func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := write()
	if err != nil {
		w.resync()
		return err
	}
	effect()
	return nil
}

type orderedServices struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	w *writeOrder
}

func (m *orderedServices) Update(k bpf.ServiceKey, v bpf.ServiceValue) error {
	return m.w.apply(func() error { return m.Map.Update(k, v) }, func() { m.w.updateService(k, v) })
}

func (m *orderedServices) Delete(k bpf.ServiceKey) error {
	return m.w.apply(func() error { return m.Map.Delete(k) }, func() { m.w.deleteService(k) })
}

func (m *orderedServices) BatchUpdate(ks []bpf.ServiceKey, vs []bpf.ServiceValue) error {
	return m.w.apply(func() error { return m.Map.BatchUpdate(ks, vs) }, func() {
		for i := range ks {
			m.w.updateService(ks[i], vs[i])
		}
	})
}

func (m *orderedServices) BatchDelete(ks []bpf.ServiceKey) error {
	return m.w.apply(func() error { return m.Map.BatchDelete(ks) }, func() {
		for _, k := range ks {
			m.w.deleteService(k)
		}
	})
}

type orderedBackends struct {
	bpf.Map[uint32, bpf.Backend]
	w *writeOrder
}

func (m *orderedBackends) Update(id uint32, v bpf.Backend) error {
	return m.w.apply(func() error { return m.Map.Update(id, v) }, func() { m.w.backends[id] = true })
}

func (m *orderedBackends) Delete(id uint32) error {
	return m.w.apply(func() error { return m.Map.Delete(id) }, func() { m.w.deleteBackend(id) })
}

func (m *orderedBackends) BatchUpdate(ids []uint32, vs []bpf.Backend) error {
	return m.w.apply(func() error { return m.Map.BatchUpdate(ids, vs) }, func() {
		for _, id := range ids {
			m.w.backends[id] = true
		}
	})
}

func (m *orderedBackends) BatchDelete(ids []uint32) error {
	return m.w.apply(func() error { return m.Map.BatchDelete(ids) }, func() {
		for _, id := range ids {
			m.w.deleteBackend(id)
		}
	})
}

type orderedMaglev struct {
	bpf.MaglevMap
	w *writeOrder
}

func (m *orderedMaglev) Update(id uint32, table []uint32) error {
	return m.w.apply(func() error { return m.MaglevMap.Update(id, table) }, func() { m.w.updateTable(id, table) })
}

func (m *orderedMaglev) Delete(id uint32) error {
	return m.w.apply(func() error { return m.MaglevMap.Delete(id) }, func() { m.w.deleteTable(id) })
}

// The write-order checker catches each wrong order it looks for, the
// moment the write is made, even when the next write repairs it.
func TestWriteOrderCheckerCatchesEachWrongOrder(t *testing.T) {
	fe := addr("10.96.15.1:80/TCP")
	slot := func(n uint16) bpf.ServiceKey { return bpf.NewServiceKey(fe, n) }
	backend := bpf.NewBackend(lb.BackendRef{Address: addr("10.15.0.1:8080/TCP"), Weight: 1}, 0)
	// The first slot with an entry of its own, and a master counting it
	// whose inline slots all name backend 1.
	n := uint16(bpf.InlineSlots + 1)
	master := bpf.ServiceValue{RevNatID: 1, ServiceMaster: bpf.ServiceMaster{Count: n}}
	for i := range master.Backends {
		master.Backends[i] = 1
	}
	for _, c := range []struct {
		name   string
		writes func(m *bpf.Maps) error
		want   string
	}{
		{"slot before its backend", func(m *bpf.Maps) error {
			return errors.Join(m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 1}), m.Backends.Update(1, backend))
		}, fmt.Sprintf("slot %d of 10.96.15.1:80/TCP was written naming backend 1", n)},
		{"inline slot before its backend", func(m *bpf.Maps) error {
			return errors.Join(m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 2}), m.Backends.Update(2, backend),
				m.Services.Update(slot(0), master), m.Backends.Update(1, backend))
		}, "slot 1 of 10.96.15.1:80/TCP was written naming backend 1"},
		{"master before its slots", func(m *bpf.Maps) error {
			return errors.Join(m.Backends.Update(1, backend),
				m.Services.BatchUpdate([]bpf.ServiceKey{slot(0), slot(n)}, []bpf.ServiceValue{master, {BackendID: 1}}))
		}, fmt.Sprintf("counting slot %d, which is not there", n)},
		{"backend before the slot naming it", func(m *bpf.Maps) error {
			return errors.Join(m.Backends.Update(1, backend), m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 1}),
				m.Backends.Delete(1), m.Services.Delete(slot(n)))
		}, "backend 1 was deleted while 1 slots"},
		{"backend before the master naming it", func(m *bpf.Maps) error {
			return errors.Join(m.Backends.Update(1, backend), m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 1}),
				m.Services.Update(slot(0), master), m.Backends.Delete(1))
		}, fmt.Sprintf("backend 1 was deleted while %d slots", n)},
		{"slot before its master", func(m *bpf.Maps) error {
			return errors.Join(m.Backends.Update(1, backend), m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 1}),
				m.Services.Update(slot(0), master),
				m.Services.BatchDelete([]bpf.ServiceKey{slot(n), slot(0)}))
		}, fmt.Sprintf("slot %d of 10.96.15.1:80/TCP was deleted while its master counts it", n)},
		{"Maglev table before its backend", func(m *bpf.Maps) error {
			table := make([]uint32, m.Maglev.TableSize())
			for i := range table {
				table[i] = 1
			}
			return errors.Join(m.Maglev.Update(1, table), m.Backends.Update(1, backend))
		}, "Maglev table 1 was written naming backend 1"},
		{"the right order", func(m *bpf.Maps) error {
			return errors.Join(m.Backends.Update(1, backend), m.Services.Update(slot(n), bpf.ServiceValue{BackendID: 1}),
				m.Services.Update(slot(0), master),
				m.Services.BatchDelete([]bpf.ServiceKey{slot(0), slot(n)}), m.Backends.Delete(1))
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			written, order := checkWriteOrder(memoryMaps(t))
			if err := c.writes(written); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(order.violations(), "; ")
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Errorf("violations %q, want %q", got, c.want)
			}
		})
	}
}
