package bpf

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Each field's own JSON encoder (appendJS) writes exactly what
// json.Marshal writes of the value its format gives, for random values of
// every map's fields: the fast path cannot drift from the reflective one.
func TestFieldJSONEncodersMatchReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b Backend
		randomize(rng, &b)
		b.State = uint8(rng.IntN(8))
		checkEncoders(t, backendFields, &b)
		var rn RevNatValue
		randomize(rng, &rn)
		checkEncoders(t, revNatFields, &rn)
		var sv ServiceValue
		randomize(rng, &sv)
		checkEncoders(t, masterFields, &sv)
		checkEncoders(t, slotFields, &sv)
		var a AffinityEntry
		randomize(rng, &a)
		checkEncoders(t, affinityFields, &a)
		sr := NewSourceRangeKey(rng.Uint32(), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.Uint32()), 0, 0}), 8+rng.IntN(25)))
		checkEncoders(t, sourceRangeFields, &sr)
	}
}

// randomize fills v's fields with random bits; an address field gets a
// v4-mapped or a v6 address at random.
func randomize[V any](rng *rand.Rand, v *V) { randomizeValue(rng, reflect.ValueOf(v).Elem()) }

func randomizeValue(rng *rand.Rand, rv reflect.Value) {
	for i := range rv.NumField() {
		switch f := rv.Field(i); f.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if rng.IntN(4) > 0 { // zero now and then: zero fields are left out
				f.SetUint(rng.Uint64() & (1<<(8*f.Type().Size()) - 1))
			}
		case reflect.Array:
			for j := range f.Len() {
				f.Index(j).SetUint(uint64(rng.Uint32() & 0xff))
			}
			if f.Len() == 16 && f.Type().Elem().Kind() == reflect.Uint8 && rng.IntN(2) == 0 { // an IPv4 address, mapped
				a := netip.AddrFrom4([4]byte{10, 0, byte(rng.Uint32()), byte(rng.Uint32())}).As16()
				reflect.Copy(f, reflect.ValueOf(a[:]))
			}
		case reflect.Struct:
			randomizeValue(rng, f)
		}
	}
}

func checkEncoders[V any](t *testing.T, fields []field[V], v *V) {
	t.Helper()
	slow := make([]field[V], len(fields))
	for i, f := range fields {
		f.appendJS = nil
		slow[i] = f
	}
	fast, err1 := marshalObject(fields, v)
	want, err2 := marshalObject(slow, v)
	if err1 != nil || err2 != nil || !bytes.Equal(fast, want) {
		t.Fatalf("%T %+v: fast %s (%v), reflective %s (%v)", v, *v, fast, err1, want, err2)
	}
}

// WriteJSON's streamed layout reads back as json.Marshal's encoding of
// the same dump, for every member: empty and nil lists, the flow seed,
// Maglev tables.
func TestStreamedDumpReadsBackAsMarshalled(t *testing.T) {
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	be := NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("[fd00::2]:8443/TCP"), State: lb.BackendTerminating, ClusterID: 3}, 2)
	be.ID = 4
	rn := NewRevNatValue(fe)
	rn.ID = 7
	full := &Dump{
		Backends: []BackendEntry{{be}, {be}},
		Maglev:   []MaglevEntry{{RevNatID: 7, Size: 251, Sum: 99, Slots: map[uint32]int{4: 251}}},
		RevNat:   []RevNatEntry{{rn}},
		Services: []ServiceEntry{
			NewServiceEntry(NewServiceKey(fe, 0), ServiceValue{RevNatID: 7, ServiceMaster: ServiceMaster{Count: 1, Flags: FlagAffinity | FlagSourceRanges}}),
			NewServiceEntry(NewServiceKey(fe, 1), ServiceValue{BackendID: BackendReject}),
		},
		SourceRanges: []SourceRangeEntry{{NewSourceRangeKey(7, netip.MustParsePrefix("10.0.0.0/8"))}},
		Affinity:     []AffinityEntry{{AffinityKey{RevNatID: 7}, AffinityValue{BackendID: 4, LastUsed: 12}}},
		FlowSeed:     "00ff",
	}
	for name, c := range map[string]struct {
		d      *Dump
		tables map[uint32][]uint32
	}{
		"full":        {full, nil},
		"with tables": {full, map[uint32][]uint32{7: {4, 4, 4}, 12: {1}}},
		"empty lists": {&Dump{Backends: []BackendEntry{}, Services: []ServiceEntry{}}, nil},
		"nil lists":   {&Dump{}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var streamed bytes.Buffer
			if err := c.d.writeJSON(&streamed, c.tables); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(DumpWithTables{Dump: *c.d, MaglevTables: c.tables})
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal(streamed.Bytes(), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, streamed.Bytes())
			}
			json.Unmarshal(want, &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("streamed:\n%s\nmarshalled:\n%s", streamed.Bytes(), want)
			}
		})
	}
}
