package bpf

import (
	"testing"
)

// The layout declares the maps the compiled object (c/lb.c) has, with the
// same types, creation flags, and key and value sizes as the Go types
// bound to them; and the object has no map the layout lacks.
func TestLayoutMatchesObject(t *testing.T) {
	spec, err := loadLb()
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range layout {
		declared[d.name] = true
		ms, ok := spec.Maps[d.name]
		if !ok {
			t.Errorf("map %s missing from the object", d.name)
			continue
		}
		if ms.Type != d.typ || ms.Flags != d.flags {
			t.Errorf("map %s: type %s flags %#x, the layout says %s %#x", d.name, ms.Type, ms.Flags, d.typ, d.flags)
		}
		if ms.KeySize != d.bind.keySize || ms.ValueSize != d.bind.valueSize {
			t.Errorf("map %s: key/value size %d/%d, Go has %d/%d", d.name, ms.KeySize, ms.ValueSize, d.bind.keySize, d.bind.valueSize)
		}
		if (ms.InnerMap != nil) != (d.innerSlots != nil) {
			t.Errorf("map %s: inner map in the object %v, inner slots in the layout %v", d.name, ms.InnerMap != nil, d.innerSlots != nil)
		}
		if d.sizedBy == nil && ms.MaxEntries != d.entries {
			t.Errorf("map %s: %d entries, the layout says %d", d.name, ms.MaxEntries, d.entries)
		}
	}
	for name := range spec.Maps {
		if !declared[name] && name != ".bss" && name != ".data" && name != ".rodata" {
			t.Errorf("map %s of the object is not in the layout", name)
		}
	}
}
