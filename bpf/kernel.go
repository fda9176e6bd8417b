package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// NewKernelMaps opens the maps pinned in cfg.LBPinDir, creating the ones
// that do not exist, so that a restarted agent finds the entries (and IDs)
// the datapath is using. A pinned map whose layout differs from this
// version's is an error, or is recreated empty with cfg.LBRecreateMaps.
// The pin directory must be on bpffs, no one but this process's user may
// have written it (checkPinDir), and no other live process may hold it
// (lockPinDir): the returned Maps hold it until closed.
func NewKernelMaps(cfg Config) (*Maps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.LBPinDir, 0o755); err != nil {
		return nil, permissionHint(fmt.Errorf("pin directory: %w", err), cfg.LBPinDir)
	}
	if err := checkPinDir(cfg.LBPinDir); err != nil {
		return nil, err
	}
	lock, err := lockPinDir(cfg.LBPinDir)
	if err != nil {
		return nil, err
	}
	spec, err := loadLb()
	if err != nil {
		lock.Close()
		return nil, err
	}
	maps := &Maps{Kind: "kernel"}
	var opened []*ebpf.Map
	gens := newGenCounter() // a migration's, which lb_services' writes go on from
	for i := range layout {
		d := &layout[i]
		ms := spec.Maps[d.name].Copy()
		ms.MaxEntries = d.maxEntries(cfg)
		ms.Pinning = ebpf.PinByName
		if d.innerSlots != nil {
			ms.InnerMap.ValueSize = 4 * d.innerSlots(cfg)
		}
		// A size left at its default may be an older version's default:
		// a map pinned at that size is kept rather than refused (see
		// openPinned).
		keepSize := d.sizedBy != nil && !cfg.LBRecreateMaps && ms.MaxEntries == d.maxEntries(DefaultConfig)
		var (
			m         *ebpf.Map
			recreated error
			migrated  int
		)
		if d.name == lbMapLbServices { // pinned by a version of an older layout? (migrate.go)
			m, migrated, err = migrateServices(ms, filepath.Join(cfg.LBPinDir, ms.Name), keepSize, cfg.LBRecreateMaps, "--"+d.sizedBy.flag, gens)
			if m != nil {
				maps.Migrated = append(maps.Migrated, MigratedMap{Name: d.name, Entries: migrated})
			}
		}
		if m == nil && err == nil {
			m, recreated, err = openPinned(ms, cfg, keepSize)
		}
		if err != nil {
			closeMaps(opened)
			lock.Close()
			return nil, permissionHint(err, cfg.LBPinDir)
		}
		if recreated != nil {
			maps.Recreated = append(maps.Recreated, RecreatedMap{Name: d.name, Reason: recreated})
		}
		if m.MaxEntries() != ms.MaxEntries {
			maps.KeptSizes = append(maps.KeptSizes, KeptSize{Name: d.name, Flag: "--" + d.sizedBy.flag, Pinned: m.MaxEntries(), Default: ms.MaxEntries})
		}
		opened = append(opened, m)
		d.bind.kernel(maps, d, m, ms)
		maps.setCapacity(d, m.MaxEntries())
	}
	if s, ok := maps.Services.(*kernelServices); ok {
		s.gens.see(gens.last.Load())
	}
	maps.close = func() error { return errors.Join(maps.closeServicesSeq(), closeMaps(opened), unlock(lock)) }
	if err := maps.openServicesSeq(); err != nil {
		maps.Close()
		return nil, err
	}
	// Holding the lock, this is the only writer of ours: writes a dead
	// agent left in flight are over.
	if s, ok := maps.ServicesSeq.(*seqWord); ok {
		maps.WritesLeftInFlight = s.closeWritesInFlight()
	}
	if err := maps.ensureSeed(); err != nil {
		maps.Close()
		return nil, err
	}
	return maps, nil
}

// permissionHint adds how to get the permission err lacks.
func permissionHint(err error, pinDir string) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w (kernel BPF maps need root: CAP_BPF and CAP_SYS_ADMIN, and write access to %s)", err, pinDir)
	}
	return err
}

func closeMaps(ms []*ebpf.Map) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// openPinned opens or creates one pinned map, checking that an existing
// one fits the spec (for map-in-map, that its inner tables do too). If it
// recreated the map (cfg.LBRecreateMaps), it says why. With keepSize, a
// pinned map that differs from the spec in max_entries alone is opened
// at its own size: an agent upgraded to larger default sizes keeps its
// entries, and the IDs live flows use, instead of refusing to start.
func openPinned(ms *ebpf.MapSpec, cfg Config, keepSize bool) (m *ebpf.Map, recreated, err error) {
	path := filepath.Join(cfg.LBPinDir, ms.Name)
	m, err = openChecked(ms, cfg.LBPinDir)
	if errors.Is(err, ebpf.ErrMapIncompatible) && keepSize {
		if pinned, perr := ebpf.LoadPinnedMap(path, nil); perr == nil {
			n := pinned.MaxEntries()
			pinned.Close()
			if n != ms.MaxEntries {
				at := ms.Copy()
				at.MaxEntries = n
				if km, kerr := openChecked(at, cfg.LBPinDir); kerr == nil {
					return km, nil, nil
				}
			}
		}
	}
	if err != nil && errors.Is(err, ebpf.ErrMapIncompatible) && cfg.LBRecreateMaps {
		recreated = err
		if rmErr := os.Remove(path); rmErr != nil {
			return nil, nil, fmt.Errorf("map %s: recreate: %w", path, rmErr)
		}
		m, err = ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: cfg.LBPinDir})
	}
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return nil, nil, fmt.Errorf("map %s: the pinned map does not match this version's layout: %w"+
			" (restart with --lb-recreate-maps to recreate it; its entries are lost)", path, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	return m, recreated, nil
}

// openChecked opens or creates the map of ms pinned in pinDir, and checks
// that a map of maps takes inner maps of ms's.
func openChecked(ms *ebpf.MapSpec, pinDir string) (*ebpf.Map, error) {
	m, err := ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: pinDir})
	if err == nil && ms.InnerMap != nil {
		if err = checkInnerMaps(m, ms.InnerMap); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, err
}

// checkInnerMaps reports ErrMapIncompatible if the outer map takes no inner
// map of the spec's size (the Maglev table size changed): it looks at the
// first inner map, or, with none, tries inserting one.
func checkInnerMaps(outer *ebpf.Map, inner *ebpf.MapSpec) error {
	m, err := firstInnerMap(outer)
	if err != nil {
		return err
	}
	if m == nil {
		return probeInnerMap(outer, inner)
	}
	defer m.Close()
	if m.ValueSize() != inner.ValueSize {
		return fmt.Errorf("%w: inner tables hold %d bytes, want %d", ebpf.ErrMapIncompatible, m.ValueSize(), inner.ValueSize)
	}
	return nil
}

// firstInnerMap opens the first inner map of a map of maps, nil if it has
// none.
func firstInnerMap(outer *ebpf.Map) (*ebpf.Map, error) {
	var key, id uint32
	it := outer.Iterate()
	if !it.Next(&key, &id) {
		return nil, it.Err()
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("map %s: inner map %d: %w", outer.String(), id, err)
	}
	return m, nil
}

// probeInnerMap inserts (and removes) an inner map of the spec into an
// empty outer map; the kernel refuses one that does not match the outer
// map's template.
func probeInnerMap(outer *ebpf.Map, inner *ebpf.MapSpec) error {
	m, err := ebpf.NewMap(inner)
	if err != nil {
		return fmt.Errorf("map %s: probing inner map: %w", outer.String(), err)
	}
	defer m.Close()
	const probeKey = ^uint32(0)
	if err := outer.Update(probeKey, m, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: inner tables of %d bytes do not fit: %w", ebpf.ErrMapIncompatible, inner.ValueSize, err)
		}
		return fmt.Errorf("map %s: probing inner map: %w", outer.String(), err)
	}
	return outer.Delete(probeKey)
}

type kernelMap[K comparable, V any] struct {
	m    *ebpf.Map
	name string
}

func (m *kernelMap[K, V]) Name() string { return m.name }

func (m *kernelMap[K, V]) Lookup(k K) (V, bool, error) {
	var v V
	found, err := m.found("lookup", m.m.Lookup(&k, &v))
	return v, found, err
}

func (m *kernelMap[K, V]) Update(k K, v V) error {
	return m.wrap("update", m.m.Update(&k, &v, ebpf.UpdateAny))
}

// Create adds k unless the map holds it already (ErrExists).
func (m *kernelMap[K, V]) Create(k K, v V) error {
	err := m.m.Update(&k, &v, ebpf.UpdateNoExist)
	if errors.Is(err, ebpf.ErrKeyExist) {
		return ErrExists
	}
	return m.wrap("create", err)
}

// LookupAndDelete deletes k and returns the value it held, in one step
// (Linux 5.14+ for hash maps): a write of k by the datapath comes either
// before, and is what it returns, or after, and stays.
func (m *kernelMap[K, V]) LookupAndDelete(k K) (V, bool, error) {
	var v V
	found, err := m.found("lookup and delete", m.m.LookupAndDelete(&k, &v))
	return v, found, err
}

// found says whether the read op found its key, given its error: a
// missing key is no error.
func (m *kernelMap[K, V]) found(op string, err error) (bool, error) {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	return err == nil, m.wrap(op, err)
}

func (m *kernelMap[K, V]) Delete(k K) error {
	if err := m.m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return m.wrap("delete", err)
	}
	return nil
}

func (m *kernelMap[K, V]) wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.E2BIG), errors.Is(err, unix.ENOSPC): // hash maps say E2BIG, LPM tries ENOSPC
		return &MapFullError{Map: m.name, Op: op, MaxEntries: int(m.m.MaxEntries()), Err: err}
	}
	return fmt.Errorf("%s: %s: %w", m.name, op, err)
}

func (m *kernelMap[K, V]) BatchUpdate(ks []K, vs []V) error {
	if len(ks) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.name, len(ks), len(vs))
	}
	if len(ks) == 0 {
		return nil
	}
	_, err := m.m.BatchUpdate(ks, vs, nil)
	if errors.Is(err, ebpf.ErrNotSupported) {
		for i := range ks {
			if err := m.Update(ks[i], vs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return m.wrap("batch update", err)
}

// BatchDelete deletes in batches, stepping over keys that are already
// gone (the kernel stops a batch at the first missing key).
func (m *kernelMap[K, V]) BatchDelete(ks []K) error {
	for len(ks) > 0 {
		n, err := m.m.BatchDelete(ks, nil)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			for _, k := range ks {
				if err := m.Delete(k); err != nil {
					return err
				}
			}
			return nil
		case errors.Is(err, ebpf.ErrKeyNotExist):
			ks = ks[n+1:]
		default:
			return m.wrap("batch delete", err)
		}
	}
	return nil
}

// Iterate reads the map in batches (BPF_MAP_LOOKUP_BATCH, one syscall
// per iterateBatch entries) where the kernel offers them, one entry at a
// time (two syscalls per entry) where it does not (LPM tries), and for
// per-CPU maps (whose values a batch returns flat, not per entry).
func (m *kernelMap[K, V]) Iterate(fn func(K, V) bool) error {
	switch m.m.Type() {
	case ebpf.PerCPUHash, ebpf.PerCPUArray, ebpf.LRUCPUHash:
	default:
		if err := m.iterateBatched(fn); !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
	}
	var (
		k K
		v V
	)
	it := m.m.Iterate()
	for it.Next(&k, &v) {
		if !fn(k, v) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: iterate: %w", m.name, err)
	}
	return nil
}

// iterateBatch is how many entries Iterate reads per syscall.
const iterateBatch = 1024

// iterateBatched is Iterate with batched lookups. It reports
// ebpf.ErrNotSupported, having called fn for nothing, if the kernel has
// no batched lookup for the map.
func (m *kernelMap[K, V]) iterateBatched(fn func(K, V) bool) error {
	var cursor ebpf.MapBatchCursor
	keys, vals := make([]K, iterateBatch), make([]V, iterateBatch)
	for {
		n, err := m.m.BatchLookup(&cursor, keys, vals, nil)
		if errors.Is(err, unix.ENOSPC) && len(keys) < 1<<20 {
			// A hash bucket holds more entries than fit: the cursor
			// stays at it, so read it again with room for it.
			keys, vals = make([]K, 2*len(keys)), make([]V, 2*len(vals))
			continue
		}
		for i := range n {
			if !fn(keys[i], vals[i]) {
				return nil
			}
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist): // the end
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return err
		case err != nil:
			return fmt.Errorf("%s: iterate: %w", m.name, err)
		}
	}
}

// OpenPinnedMaps opens the maps pinned in dir, read-only in spirit: it
// creates nothing, and fails with a clear error when they are not there.
// For tools (lbctl) that look at an agent's maps: it takes no lock, so
// it reads a running agent's maps, and checks the pin directory as
// NewKernelMaps does. Maglev's TableSize is
// that of the tables found, 0 when there are none.
func OpenPinnedMaps(dir string) (*Maps, error) {
	// The maps name backends and frontends that lbctl shows as the
	// agent's: maps another user could have put there are refused, as
	// the agent refuses them. A missing directory is said below.
	if _, err := os.Stat(dir); err == nil {
		if err := checkPinDir(dir); err != nil {
			return nil, err
		}
	}
	spec, err := loadLb()
	if err != nil {
		return nil, err
	}
	maps := &Maps{Kind: "kernel"}
	var opened []*ebpf.Map
	for i := range layout {
		d := &layout[i]
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, d.name), nil)
		if errors.Is(err, os.ErrNotExist) && d.name == lbMapLbServicesSeq {
			// An agent of a version before it: nothing here writes, and
			// the word is one in memory, so that reading it works.
			maps.ServicesSeq = &seqWord{name: d.name, w: new(atomic.Uint64)}
			continue
		}
		if err != nil {
			closeMaps(opened)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no pinned map %s in %s (is an agent running with --lb-pin-dir %s?)", d.name, dir, dir)
			}
			return nil, fmt.Errorf("map %s in %s: %w", d.name, dir, err)
		}
		opened = append(opened, m)
		ms := spec.Maps[d.name].Copy()
		if err := pinnedLayoutMatches(m, ms, dir); err != nil {
			closeMaps(opened)
			return nil, err
		}
		if ms.InnerMap != nil {
			ms.InnerMap.ValueSize = pinnedInnerValueSize(m)
		}
		d.bind.kernel(maps, d, m, ms)
		maps.setCapacity(d, m.MaxEntries())
	}
	maps.close = func() error { return errors.Join(maps.closeServicesSeq(), closeMaps(opened)) }
	if err := maps.openServicesSeq(); err != nil {
		maps.Close()
		return nil, err
	}
	return maps, nil
}

// pinnedLayoutMatches says, naming the map, when m, pinned in dir, is not
// of the layout of ms: read with this version's values, its entries
// failed with "buffer too small" at the first lookup, which named no
// cause. An lb_services of an older layout (migrate.go)
// is an agent of an older version that this version's agent migrates
// at its start.
func pinnedLayoutMatches(m *ebpf.Map, ms *ebpf.MapSpec, dir string) error {
	if m.Type() == ms.Type && m.KeySize() == ms.KeySize && m.ValueSize() == ms.ValueSize {
		return nil
	}
	if change := olderServiceLayout(m.ValueSize()); ms.Name == lbMapLbServices && m.KeySize() == ms.KeySize && change != "" {
		return fmt.Errorf("map %s in %s: of the layout before %s (%d-byte values, this version's %d):"+
			" the agent that pinned it is of an older version; use its lbctl, or upgrade the agent, which migrates the map at its start",
			ms.Name, dir, change, m.ValueSize(), ms.ValueSize)
	}
	return fmt.Errorf("map %s in %s: %s with %d-byte keys and %d-byte values, this version's is %s with %d and %d:"+
		" the agent that pinned it is of another version; use its lbctl", ms.Name, dir, m.Type(), m.KeySize(), m.ValueSize(), ms.Type, ms.KeySize, ms.ValueSize)
}

// pinnedInnerValueSize returns the value size of the first inner map of a
// map of maps, 0 if it has none (or it cannot be read).
func pinnedInnerValueSize(outer *ebpf.Map) uint32 {
	m, err := firstInnerMap(outer)
	if err != nil || m == nil {
		return 0
	}
	defer m.Close()
	return m.ValueSize()
}
