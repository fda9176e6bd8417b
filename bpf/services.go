package bpf

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
)

// The kernel may hand a hash element that a rewrite or a delete freed to
// the very next insert (Linux 6.1+, kernel/bpf/memalloc.c), while a
// program on another CPU still copies it. The datapath tells a whole
// copy of a master from a torn one by its generation (ServiceValue.Gen,
// master.h's lb_read_master), which must differ between any two writes
// of the map: kernel Maps stamp every master they write here, so that
// callers (the reconciler, tests, tools) neither set nor see it.

// genCounter hands out generations, each above every one handed out
// before and every one its map was seen holding.
type genCounter struct{ last atomic.Uint64 }

// newGenCounter starts above any generation an earlier agent could have
// written by now: the wall clock in nanoseconds counts faster than any
// agent writes. see raises it past what a restore reads, should the
// clock have gone back.
func newGenCounter() *genCounter {
	g := &genCounter{}
	g.last.Store(uint64(time.Now().UnixNano()))
	return g
}

func (g *genCounter) next() uint64 { return g.last.Add(1) }

// see makes the next generations larger than gen.
func (g *genCounter) see(gen uint64) {
	for {
		last := g.last.Load()
		if gen <= last || g.last.CompareAndSwap(last, gen) {
			return
		}
	}
}

// stamp returns v as written for key k: a master with the next
// generation, a slot's entry with none.
func (g *genCounter) stamp(k ServiceKey, v ServiceValue) ServiceValue {
	v.Gen = 0
	if k.Slot == 0 {
		v.Gen = g.next()
	}
	return v
}

// kernelServices is lb_services in the kernel: a kernelMap whose writes
// stamp masters with a generation and whose reads leave it out. Every
// write is bracketed in seq (servicesseq.go): the datapath trusts a
// read of one lookup that no bracket overlapped. All writes of the
// agent's lb_services go through here; a migration (migrate.go) fills
// a new map before any program can read it.
type kernelServices struct {
	*kernelMap[ServiceKey, ServiceValue]
	gens *genCounter
	seq  Seq // nil only in maps opened for reading (OpenPinnedMaps) before lb_services_seq existed

	mu      sync.Mutex
	stamped []ServiceValue // BatchUpdate's copy of the values, reused
}

func newKernelServices(em *ebpf.Map, name string) *kernelServices {
	return &kernelServices{kernelMap: &kernelMap[ServiceKey, ServiceValue]{m: em, name: name}, gens: newGenCounter()}
}

func (m *kernelServices) Lookup(k ServiceKey) (ServiceValue, bool, error) {
	v, ok, err := m.kernelMap.Lookup(k)
	m.gens.see(v.Gen)
	v.Gen = 0
	return v, ok, err
}

// write runs op, a write of the map, in a bracket.
func (m *kernelServices) write(op func() error) error {
	if m.seq == nil {
		return op()
	}
	m.seq.BeginWrite()
	defer m.seq.EndWrite()
	return op()
}

func (m *kernelServices) Update(k ServiceKey, v ServiceValue) error {
	return m.write(func() error { return m.kernelMap.Update(k, m.gens.stamp(k, v)) })
}

// Create adds k unless the map holds it already (ErrExists).
func (m *kernelServices) Create(k ServiceKey, v ServiceValue) error {
	return m.write(func() error { return m.kernelMap.Create(k, m.gens.stamp(k, v)) })
}

func (m *kernelServices) Delete(k ServiceKey) error {
	return m.write(func() error { return m.kernelMap.Delete(k) })
}

func (m *kernelServices) BatchDelete(ks []ServiceKey) error {
	return m.write(func() error { return m.kernelMap.BatchDelete(ks) })
}

// LookupAndDelete (DeleteStale's) is a write too, and leaves the
// generation out as Lookup does.
func (m *kernelServices) LookupAndDelete(k ServiceKey) (v ServiceValue, held bool, err error) {
	err = m.write(func() (err error) {
		v, held, err = m.kernelMap.LookupAndDelete(k)
		return err
	})
	v.Gen = 0
	return v, held, err
}

// BatchUpdate stamps a copy of vs: the caller's values stay as given.
func (m *kernelServices) BatchUpdate(ks []ServiceKey, vs []ServiceValue) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stamped = append(m.stamped[:0], vs...)
	for i := range m.stamped {
		if i < len(ks) {
			m.stamped[i] = m.gens.stamp(ks[i], m.stamped[i])
		}
	}
	return m.write(func() error { return m.kernelMap.BatchUpdate(ks, m.stamped) })
}

// Iterate leaves the generations out, after raising the counter past
// them: a restarted agent's restore reads every master before it writes
// one.
func (m *kernelServices) Iterate(fn func(ServiceKey, ServiceValue) bool) error {
	return m.kernelMap.Iterate(func(k ServiceKey, v ServiceValue) bool {
		m.gens.see(v.Gen)
		v.Gen = 0
		return fn(k, v)
	})
}
