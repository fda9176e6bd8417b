package bpf

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/cilium/ebpf/btf"
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
		for _, kv := range []struct {
			what string
			c    btf.Type
			ours reflect.Type
		}{{"key", ms.Key, d.bind.keyType}, {"value", ms.Value, d.bind.valueType}} {
			if err := sameType(kv.c, kv.ours); err != nil {
				t.Errorf("map %s: %s: %v", d.name, kv.what, err)
			}
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

// sameType says why ours, the Go type the layout binds, is not the Go
// form of c, the BTF type of a map's key or value: a struct must be the
// one abiPairs pairs with c's name (so that TestABIMatchesC has checked it
// field by field), anything else an unsigned integer or array of c's size.
func sameType(c btf.Type, ours reflect.Type) error {
	if c == nil { // a map of maps' value: an inner map's ID
		if ours.Kind() != reflect.Uint32 {
			return fmt.Errorf("Go has %s, C has a map's ID", ours)
		}
		return nil
	}
	c = btf.UnderlyingType(c)
	if s, ok := c.(*btf.Struct); ok {
		for _, p := range abiPairs {
			if p.c == s.Name {
				if want := reflect.TypeOf(p.ours); want != ours {
					return fmt.Errorf("Go binds %s, struct %s is %s", ours, s.Name, want)
				}
				return nil
			}
		}
		return fmt.Errorf("struct %s is not among abiPairs: add its Go type there, for TestABIMatchesC to check", s.Name)
	}
	size, err := btf.Sizeof(c)
	if err != nil {
		return err
	}
	switch ours.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Array:
		if int(ours.Size()) == size {
			return nil
		}
	}
	return fmt.Errorf("Go has %s, C has %s (%d bytes)", ours, c.TypeName(), size)
}

// The check above tells apart two structs of one size: binding lb_drops
// to CounterKey, 8 bytes like DropKey, would fail it.
func TestLayoutCheckTellsStructsOfOneSizeApart(t *testing.T) {
	spec, err := loadLb()
	if err != nil {
		t.Fatal(err)
	}
	key := spec.Maps[lbMapLbDrops].Key
	if err := sameType(key, reflect.TypeFor[DropKey]()); err != nil {
		t.Fatalf("lb_drops' own key: %v", err)
	}
	if err := sameType(key, reflect.TypeFor[CounterKey]()); err == nil {
		t.Error("lb_drops' key passes as CounterKey")
	}
}
