package bpf

import (
	"reflect"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// layout declares every map of the ABI once: the kernel implementation
// (kernel.go) and the in-memory one (memory.go) both build Maps by walking
// it, Config takes its capacity flags from it, and TestLayoutMatchesObject
// checks it against the maps compiled from c/lb.c.
var layout = []mapDef{
	{
		name: lbMapLbServices, typ: ebpf.Hash, flags: unix.BPF_F_NO_PREALLOC,
		sizedBy: &sizing{"lb-services-max", "Capacity of lb_services: frontends times (1 + backend slots)",
			func(c *Config) *uint32 { return &c.LBServicesMax }},
		bind: bindServices(),
	},
	{
		// After lb_services: its writers announce their writes here
		// (servicesseq.go).
		name: lbMapLbServicesSeq, typ: ebpf.Array, flags: unix.BPF_F_MMAPABLE, entries: 1,
		bind: bindSeq(func(m *Maps) *Seq { return &m.ServicesSeq }),
	},
	{
		// A dense ID map (slotted.go): an array write costs a third of a
		// hash insert or delete.
		name: lbMapLbBackends, typ: ebpf.Array,
		sizedBy: &sizing{"lb-backends-max", "Capacity of lb_backends",
			func(c *Config) *uint32 { return &c.LBBackendsMax }},
		// A backend ID is named only after its entry is written: a
		// never-used slot is filled in one write.
		bind: bindSlotted(func(m *Maps) *Map[uint32, Backend] { return &m.Backends },
			func(b Backend) uint32 { return b.ID }, func(b Backend, id uint32) Backend { b.ID = id; return b }, true),
	},
	{
		name: lbMapLbRevNat, typ: ebpf.Array, // a dense ID map
		sizedBy: &sizing{"lb-rev-nat-max", "Capacity of lb_rev_nat: frontends",
			func(c *Config) *uint32 { return &c.LBRevNatMax }},
		// A master entry names its rev-NAT ID before the lb_rev_nat
		// entry is written: every new ID takes two writes.
		bind: bindSlotted(func(m *Maps) *Map[uint32, RevNatValue] { return &m.RevNat },
			func(v RevNatValue) uint32 { return v.ID }, func(v RevNatValue, id uint32) RevNatValue { v.ID = id; return v }, false),
	},
	{
		name: lbMapLbMaglev, typ: ebpf.HashOfMaps,
		sizedBy: &sizing{"lb-maglev-max", "Capacity of lb_maglev: frontends using Maglev",
			func(c *Config) *uint32 { return &c.LBMaglevMax }},
		innerSlots: func(c Config) uint32 { return c.LBMaglevTableSize },
		bind:       bindMaglev(func(m *Maps) *MaglevMap { return &m.Maglev }),
	},
	{
		// The kernel refuses BPF_F_NO_PREALLOC for LRU maps.
		name: lbMapLbAffinity, typ: ebpf.LRUHash,
		sizedBy: &sizing{"lb-affinity-max", "Capacity of lb_affinity (LRU)",
			func(c *Config) *uint32 { return &c.LBAffinityMax }},
		bind: bindHash(func(m *Maps) *Map[AffinityKey, AffinityValue] { return &m.Affinity }),
	},
	{
		// The kernel requires BPF_F_NO_PREALLOC for LPM tries.
		name: lbMapLbSrcRange, typ: ebpf.LPMTrie, flags: unix.BPF_F_NO_PREALLOC,
		sizedBy: &sizing{"lb-source-ranges-max", "Capacity of lb_src_range",
			func(c *Config) *uint32 { return &c.LBSourceRangesMax }},
		bind: bindLPM(func(m *Maps) *Map[SourceRangeKey, uint8] { return &m.SourceRanges }),
	},
	{
		// One entry per kind of ID: IDMarkFrontend, IDMarkBackend.
		name: lbMapLbIdMarks, typ: ebpf.Array, entries: 2,
		bind: bindArray(func(m *Maps) *Map[uint32, uint32] { return &m.IDMarks }),
	},
	{
		// One entry: the node's flow hash seed (flowhash.go).
		name: lbMapLbFlowSeed, typ: ebpf.Array, entries: 1,
		bind: bindArray(func(m *Maps) *Map[uint32, FlowSeed] { return &m.FlowSeed }),
	},
	// The reference datapath's maps (datapath.go): it writes them.
	{
		name: lbMapLbCt, typ: ebpf.LRUHash,
		sizedBy: &sizing{"lb-ct-max", "Capacity of lb_ct (LRU), the reference datapath's conntrack: one entry per flow (two for some)",
			func(c *Config) *uint32 { return &c.LBCTMax }},
		bind: bindHash(func(m *Maps) *Map[CTKey, CTValue] { return &m.Conntrack }),
	},
	{
		name: lbMapLbSockCt, typ: ebpf.LRUHash,
		sizedBy: &sizing{"lb-sock-ct-max", "Capacity of lb_sock_ct (LRU), the reference datapath's socket conntrack: one or two entries per socket",
			func(c *Config) *uint32 { return &c.LBSockCTMax }},
		bind: bindHash(func(m *Maps) *Map[CTKey, CTValue] { return &m.SockConntrack }),
	},
	{
		name: lbMapLbCounters, typ: ebpf.PerCPUHash, flags: unix.BPF_F_NO_PREALLOC,
		sizedBy: &sizing{"lb-counters-max", "Capacity of lb_counters: pairs of frontend and backend with traffic",
			func(c *Config) *uint32 { return &c.LBCountersMax }},
		bind: bindPerCPU(func(m *Maps) *Map[CounterKey, []CounterValue] { return &m.Counters }),
	},
	{
		name: lbMapLbDrops, typ: ebpf.PerCPUHash, flags: unix.BPF_F_NO_PREALLOC,
		sizedBy: &sizing{"lb-drops-max", "Capacity of lb_drops: pairs of frontend and drop reason",
			func(c *Config) *uint32 { return &c.LBDropsMax }},
		bind: bindPerCPU(func(m *Maps) *Map[DropKey, []uint64] { return &m.Drops }),
	},
}

// mapDef is one map of the layout.
type mapDef struct {
	// name is the map's name in c/lb.c and the file name of its pin.
	name string
	// typ says how the map behaves, in memory too: a full Hash or LPMTrie
	// refuses new keys, a full LRUHash evicts, an Array has every index.
	typ ebpf.MapType
	// flags are the creation flags c/lb.c gives the map.
	flags uint32
	// sizedBy is the flag and Config field that set max_entries; nil for
	// a fixed size, entries.
	sizedBy *sizing
	entries uint32
	// innerSlots, for a map of maps, is the number of uint32 slots in the
	// one value of each inner array (a Maglev table).
	innerSlots func(Config) uint32
	// bind ties the map to its field of Maps and to its Go key and value.
	bind binding
}

// sizing is a capacity flag and the Config field it sets.
type sizing struct {
	flag, help string
	field      func(*Config) *uint32
}

// maxEntries returns the map's capacity under cfg.
func (d *mapDef) maxEntries(cfg Config) uint32 {
	if d.sizedBy == nil {
		return d.entries
	}
	return *d.sizedBy.field(&cfg)
}

// binding builds one map's field of Maps from either implementation.
type binding struct {
	keySize, valueSize uint32
	// keyType and valueType are the Go types of a key and of a value (of
	// one CPU's value, for a per-CPU map), which TestLayoutMatchesObject
	// matches with the BTF types of the map's key and value.
	keyType, valueType reflect.Type
	// kernel wraps an opened map; ms is the spec it was opened with.
	kernel func(m *Maps, d *mapDef, em *ebpf.Map, ms *ebpf.MapSpec)
	memory func(m *Maps, d *mapDef, cfg Config, faults FaultHook)
}

func sizeOf[T any]() uint32 { return uint32(reflect.TypeFor[T]().Size()) }

// bindHash binds a hash map (LRU or not) to the Maps field that field
// returns.
func bindHash[K comparable, V any](field func(*Maps) *Map[K, V]) binding {
	return binding{
		keySize: sizeOf[K](), valueSize: sizeOf[V](),
		keyType: reflect.TypeFor[K](), valueType: reflect.TypeFor[V](),
		kernel: func(m *Maps, d *mapDef, em *ebpf.Map, _ *ebpf.MapSpec) {
			*field(m) = &kernelMap[K, V]{m: em, name: d.name}
		},
		memory: func(m *Maps, d *mapDef, cfg Config, faults FaultHook) {
			*field(m) = newMemMap[K, V](d, cfg, faults)
		},
	}
}

// bindServices binds lb_services, whose kernel map stamps the masters
// it writes with a generation (services.go).
func bindServices() binding {
	b := bindHash(func(m *Maps) *Map[ServiceKey, ServiceValue] { return &m.Services })
	b.kernel = func(m *Maps, d *mapDef, em *ebpf.Map, _ *ebpf.MapSpec) {
		m.Services = newKernelServices(em, d.name)
	}
	return b
}

// bindSeq binds a map of one word that writers add to (servicesseq.go).
// The kernel's is mapped into memory once every map is open.
func bindSeq(field func(*Maps) *Seq) binding {
	return binding{
		keySize: 4, valueSize: 8,
		keyType: reflect.TypeFor[uint32](), valueType: reflect.TypeFor[uint64](),
		kernel: func(m *Maps, d *mapDef, em *ebpf.Map, _ *ebpf.MapSpec) {
			// A word of the heap until mapWord maps the map's.
			*field(m) = &seqWord{name: d.name, em: em, w: new(atomic.Uint64)}
		},
		memory: func(m *Maps, d *mapDef, _ Config, _ FaultHook) {
			*field(m) = &seqWord{name: d.name, w: new(atomic.Uint64)}
		},
	}
}

// bindLPM binds an LPM trie whose keys say which stored prefixes cover
// them.
func bindLPM[K prefixKey[K], V any](field func(*Maps) *Map[K, V]) binding {
	b := bindHash(field)
	b.memory = func(m *Maps, d *mapDef, cfg Config, faults FaultHook) {
		*field(m) = &memLPM[K, V]{newMemMap[K, V](d, cfg, faults)}
	}
	return b
}

// bindArray binds an array map.
func bindArray[V any](field func(*Maps) *Map[uint32, V]) binding {
	b := bindHash(field)
	b.memory = func(m *Maps, d *mapDef, cfg Config, faults FaultHook) {
		*field(m) = &memArray[V]{newMemMap[uint32, V](d, cfg, faults)}
	}
	return b
}

// bindSlotted binds a dense ID map: an array whose values carry their
// key, an ID (idOf reads it, withID sets it), which lives in slot
// ID % max_entries (slotted.go). fillInOneWrite: nothing names an ID
// before its entry is written, so a never-used slot takes one write.
func bindSlotted[V comparable](field func(*Maps) *Map[uint32, V], idOf func(V) uint32, withID func(V, uint32) V, fillInOneWrite bool) binding {
	return binding{
		keySize: 4, valueSize: sizeOf[V](),
		keyType: reflect.TypeFor[uint32](), valueType: reflect.TypeFor[V](),
		kernel: func(m *Maps, d *mapDef, em *ebpf.Map, _ *ebpf.MapSpec) {
			*field(m) = &slotted[V]{arr: &kernelMap[uint32, V]{m: em, name: d.name}, n: max(em.MaxEntries(), 1), idOf: idOf, withID: withID, fillInOneWrite: fillInOneWrite}
		},
		memory: func(m *Maps, d *mapDef, cfg Config, faults FaultHook) {
			arr := &memArray[V]{newMemMap[uint32, V](d, cfg, faults)}
			*field(m) = &slotted[V]{arr: arr, n: max(d.maxEntries(cfg), 1), idOf: idOf, withID: withID, fillInOneWrite: fillInOneWrite}
		},
	}
}

// bindMaglev binds the map of Maglev tables: keys are frontend IDs, values
// inner arrays holding one table each (4 bytes: an inner map's ID).
func bindMaglev(field func(*Maps) *MaglevMap) binding {
	return binding{
		keySize: 4, valueSize: 4, // an inner map's ID
		keyType: reflect.TypeFor[uint32](), valueType: reflect.TypeFor[uint32](),
		kernel: func(m *Maps, d *mapDef, em *ebpf.Map, ms *ebpf.MapSpec) {
			inner := ms.InnerMap.Copy()
			inner.Pinning = ebpf.PinNone
			*field(m) = &kernelMaglev{outer: em, name: d.name, inner: inner, size: int(inner.ValueSize / 4)}
		},
		memory: func(m *Maps, d *mapDef, cfg Config, faults FaultHook) {
			*field(m) = &memMaglev{m: newMemMap[uint32, []uint32](d, cfg, faults), size: int(d.innerSlots(cfg))}
		},
	}
}
