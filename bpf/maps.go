package bpf

import (
	"errors"
	"fmt"
	"iter"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/lb/maglev"
)

// Map is one BPF map with typed keys and values. The kernel and in-memory
// implementations behave the same: Update of a new key fails when the map
// is full (an LRU map evicts instead), Delete of a missing key succeeds,
// and errors name the map.
type Map[K comparable, V any] interface {
	Name() string
	Lookup(K) (V, bool, error)
	Update(K, V) error
	Delete(K) error
	// BatchUpdate and BatchDelete apply many entries in few syscalls where
	// the kernel allows. On error, a prefix of the entries may have been
	// applied.
	BatchUpdate([]K, []V) error
	BatchDelete([]K) error
	// Iterate calls fn for every entry, in no particular order, until fn
	// returns false.
	Iterate(fn func(K, V) bool) error
}

// MaglevMap holds one Maglev lookup table (TableSize backend IDs) per
// frontend ID. Update replaces a table in one step: a reader sees the old
// table or the new one, never a mix.
type MaglevMap interface {
	Name() string
	TableSize() int
	Lookup(revNatID uint32) ([]uint32, bool, error)
	Update(revNatID uint32, table []uint32) error
	Delete(revNatID uint32) error
	Iterate(fn func(revNatID uint32, table []uint32) bool) error
}

// Maps is the set of maps the reconciler writes, kernel or in-memory.
type Maps struct {
	// Kind is "kernel" or "memory".
	Kind     string
	Services Map[ServiceKey, ServiceValue]
	// ServicesSeq counts the writes of Services (lb_services_seq), which
	// Services brackets: a writer of lb_services by other means brackets
	// its writes too (Seq).
	ServicesSeq  Seq
	Backends     Map[uint32, Backend]
	RevNat       Map[uint32, RevNatValue]
	Maglev       MaglevMap
	Affinity     Map[AffinityKey, AffinityValue]
	SourceRanges Map[SourceRangeKey, uint8]
	// IDMarks holds, per kind of ID (IDMarkFrontend, IDMarkBackend), an ID
	// above every ID handed out.
	IDMarks Map[uint32, uint32]
	// FlowSeed holds, at key 0, the node's flow hash seed (flowhash.go).
	FlowSeed Map[uint32, FlowSeed]
	// The reference datapath's maps: it writes them, the control plane
	// reads them. Counters and Drops hold one value per possible CPU.
	Conntrack     Map[CTKey, CTValue]
	SockConntrack Map[CTKey, CTValue]
	Counters      Map[CounterKey, []CounterValue]
	Drops         Map[DropKey, []uint64]

	// Recreated lists the pinned maps that NewKernelMaps recreated empty
	// (Config.LBRecreateMaps), each with why; bpf.Cell logs them.
	Recreated []RecreatedMap
	// Migrated lists the pinned maps that NewKernelMaps converted from
	// an older version's layout, keeping their entries (migrate.go).
	Migrated []MigratedMap
	// KeptSizes lists the pinned maps that NewKernelMaps opened at their
	// pinned size, not at the default size the configuration left them
	// at (an older version's default); bpf.Cell logs them.
	KeptSizes []KeptSize
	// WritesLeftInFlight is how many writes of lb_services a writer
	// before NewKernelMaps left announced and unfinished
	// (lb_services_seq), which it ended; bpf.Cell logs them.
	WritesLeftInFlight uint32

	capacities map[string]Capacity
	close      func() error
}

// KeptSize is a pinned map kept at its size, and the default it kept
// instead (Flag sets it; with --lb-recreate-maps, the map is recreated
// empty at the size given).
type KeptSize struct {
	Name, Flag      string
	Pinned, Default uint32
}

// RecreatedMap is a pinned map recreated empty, and why.
type RecreatedMap struct {
	Name   string
	Reason error // wraps ebpf.ErrMapIncompatible
}

// Capacity bounds a map: the most entries it holds, and the flag that
// sets that number ("" for a map of fixed size).
type Capacity struct {
	MaxEntries int
	Flag       string
}

// Capacity returns the capacity of the map called name, and false for a
// map this set does not have.
func (m *Maps) Capacity(name string) (Capacity, bool) {
	c, ok := m.capacities[name]
	return c, ok
}

// setCapacity records the capacity of d's map.
func (m *Maps) setCapacity(d *mapDef, maxEntries uint32) {
	if m.capacities == nil {
		m.capacities = make(map[string]Capacity, len(layout))
	}
	c := Capacity{MaxEntries: int(maxEntries)}
	if d.sizedBy != nil {
		c.Flag = "--" + d.sizedBy.flag
	}
	m.capacities[d.name] = c
}

// Keys of Maps.IDMarks.
const (
	IDMarkFrontend = 0
	IDMarkBackend  = 1
)

// Close releases the maps. Kernel maps stay pinned.
func (m *Maps) Close() error {
	if m.close == nil {
		return nil
	}
	return m.close()
}

// Config sizes the maps and says where kernel maps are pinned.
type Config struct {
	LBPinDir          string
	LBRecreateMaps    bool
	LBServicesMax     uint32
	LBBackendsMax     uint32
	LBRevNatMax       uint32
	LBMaglevMax       uint32
	LBAffinityMax     uint32
	LBSourceRangesMax uint32
	LBMaglevTableSize uint32
	LBCTMax           uint32
	LBSockCTMax       uint32
	LBCountersMax     uint32
	LBDropsMax        uint32
}

// DefaultConfig is the default map configuration. It holds 100,000
// services of 10 distinct backends each with no flag (kube-proxy needs
// none at that size): lb_services takes 1 + 10 entries a frontend, 1.1M
// of its 2M; lb_backends one slot a backend, 1M of its 1M + 48K;
// lb_rev_nat one a frontend, with room for NodePorts. What that costs
// the kernel, measured, is in docs/maps-and-reconciler.md: lb_services
// is a hash map without preallocation, whose entries cost memory only
// when used, but whose buckets (16 bytes each, max_entries rounded up to
// a power of two) are allocated whole; the two dense ID maps are arrays,
// allocated whole.
var DefaultConfig = Config{
	LBPinDir:          "/sys/fs/bpf/lbstate",
	LBServicesMax:     1 << 21,
	LBBackendsMax:     1 << 20,
	LBRevNatMax:       1 << 18,
	LBMaglevMax:       65536,
	LBAffinityMax:     65536,
	LBSourceRangesMax: 16384,
	LBMaglevTableSize: maglev.DefaultTableSize,
	LBCTMax:           131072,
	LBSockCTMax:       65536,
	LBCountersMax:     65536,
	LBDropsMax:        16384,
}

// Flags registers the configuration's flags; the capacity flags are the
// layout's.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("lb-pin-dir", def.LBPinDir, "bpffs directory where the load-balancing maps are pinned")
	flags.Bool("lb-recreate-maps", def.LBRecreateMaps, "Recreate pinned maps whose layout does not match this version (their entries are lost)")
	for _, d := range layout {
		if s := d.sizedBy; s != nil {
			flags.Uint32(s.flag, *s.field(&def), s.help)
		}
	}
	flags.Uint32("lb-maglev-table-size", def.LBMaglevTableSize, "Maglev lookup table size, a prime up to 131071")
}

// Validate reports what is wrong with the configuration.
func (c Config) Validate() error {
	if err := maglev.ValidateTableSize(int(c.LBMaglevTableSize)); err != nil {
		return fmt.Errorf("--lb-maglev-table-size: %w", err)
	}
	for _, d := range layout {
		if s := d.sizedBy; s != nil && *s.field(&c) == 0 {
			return fmt.Errorf("--%s: must be above 0", s.flag)
		}
	}
	return nil
}

// ErrMapFull is returned (wrapped, in a *MapFullError) when a new entry
// does not fit.
var ErrMapFull = errors.New("map full")

// MapFullError is the error of a write that a full map refused.
// errors.Is(err, ErrMapFull) holds for it.
type MapFullError struct {
	Map        string
	Op         string // "update", "batch update", "update 7"
	MaxEntries int
	Err        error // the kernel's error; nil for in-memory maps
}

func (e *MapFullError) Error() string {
	s := fmt.Sprintf("%s: %s: %v (%d entries)", e.Map, e.Op, ErrMapFull, e.MaxEntries)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *MapFullError) Is(target error) bool { return target == ErrMapFull }

func (e *MapFullError) Unwrap() error { return e.Err }

// Count returns how many entries m holds. It iterates, except over a
// dense ID map (lb_backends, lb_rev_nat), which knows: reading all its
// slots costs time in proportion to its capacity, not its entries.
func Count[K comparable, V any](m Map[K, V]) (int, error) {
	if c, ok := m.(interface{ Count() (int, error) }); ok {
		return c.Count()
	}
	n := 0
	err := m.Iterate(func(K, V) bool { n++; return true })
	return n, err
}

// DeleteHolding deletes ids from m, whose entries hold vals as the
// caller last wrote them. A dense ID map (Maps.Backends, Maps.RevNat)
// writes a deleted slot's fields back with its ID cleared: given them,
// it need not read each slot first. Any other map deletes the keys.
func DeleteHolding[V any](m Map[uint32, V], ids []uint32, vals []V) error {
	if d, ok := m.(interface {
		BatchDeleteHolding([]uint32, []V) error
	}); ok {
		return d.BatchDeleteHolding(ids, vals)
	}
	return m.BatchDelete(ids)
}

// MarkSlotsUsed tells a dense ID map (Maps.Backends, Maps.RevNat) that
// readers may hold ids, found in other maps by a restore: an empty slot
// of one of them takes its next ID in two writes, fields then ID, as a
// slot that held an ID does, never in the one write a never-used slot
// gets (slotted.go). Any other map ignores it.
func MarkSlotsUsed[V any](m Map[uint32, V], ids iter.Seq[uint32]) error {
	if u, ok := m.(interface{ MarkSlotsUsed(iter.Seq[uint32]) error }); ok {
		return u.MarkSlotsUsed(ids)
	}
	return nil
}
