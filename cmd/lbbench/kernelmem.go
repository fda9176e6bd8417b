package main

import (
	"cmp"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// mapMemory is what the kernel says one BPF map costs (its memlock:
// for a hash map made with BPF_F_NO_PREALLOC, its buckets and the entries
// it holds; for an array or LRU map, all of it).
type mapMemory struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// kernelMapMemory reads the memlock of every BPF map this process holds
// open (/proc/self/fdinfo), largest first, with their total.
func kernelMapMemory() ([]mapMemory, int64) {
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return nil, 0
	}
	seen := map[uint64]bool{} // a map open twice counts once
	var maps []mapMemory
	var total int64
	for _, e := range ents {
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		id, memlock, ok := parseMapFdinfo(string(info))
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		name := "map " + strconv.FormatUint(id, 10)
		if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
			if mi, err := m.Info(); err == nil && mi.Name != "" {
				name = mi.Name
			}
			m.Close()
		}
		maps = append(maps, mapMemory{name, memlock})
		total += memlock
	}
	slices.SortFunc(maps, func(a, b mapMemory) int { return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Name, b.Name)) })
	return maps, total
}

// parseMapFdinfo reads a BPF map's ID and memlock from its fdinfo; ok is
// false for a file descriptor of anything else.
func parseMapFdinfo(info string) (id uint64, memlock int64, ok bool) {
	var hasType, hasID, hasMem bool
	for line := range strings.Lines(info) {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "map_type":
			hasType = true
		case "map_id":
			id, err = strconv.ParseUint(v, 10, 64)
			hasID = err == nil
		case "memlock":
			memlock, err = strconv.ParseInt(v, 10, 64)
			hasMem = err == nil
		}
	}
	return id, memlock, hasType && hasID && hasMem
}

// largestMaps names the n largest maps and their memory, for a line of
// output.
func largestMaps(maps []mapMemory, n int) string {
	var b strings.Builder
	for i, m := range maps[:min(n, len(maps))] {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + m.Name + " " + strconv.FormatFloat(float64(m.Bytes)/(1<<20), 'f', 1, 64) + " MiB")
	}
	return b.String()
}
