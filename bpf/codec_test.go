package bpf

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Every field of a master entry (ServiceMaster and the rev-NAT ID) and of a
// slot (the backend ID) shows in the text dump, and survives the JSON
// dump and LoadDump: a field added to the struct but not to masterFields
// fails here, not silently in a dump that leaves it out.
func TestCodecCoversEveryField(t *testing.T) {
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	base := ServiceValue{RevNatID: 1, ServiceMaster: ServiceMaster{Type: 1, Algorithm: AlgorithmRandom}}
	check := func(t *testing.T, slot uint16, v ServiceValue) {
		t.Helper()
		zero := base
		if slot > 0 {
			zero = ServiceValue{BackendID: 1}
		}
		line := func(v ServiceValue) string {
			var b bytes.Buffer
			d := &Dump{Services: []ServiceEntry{NewServiceEntry(NewServiceKey(fe, slot), v)}}
			if err := d.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
		if got, was := line(v), line(zero); got == was {
			t.Errorf("the text dump does not show the field: %q", got)
		}
		m, js := loadThroughJSON(t, &Dump{Services: []ServiceEntry{NewServiceEntry(NewServiceKey(fe, slot), v)}})
		got, ok, err := m.Services.Lookup(NewServiceKey(fe, slot))
		if err != nil || !ok || got != v {
			t.Errorf("after JSON and LoadDump: %+v (found %v, %v), want %+v (JSON %s)", got, ok, err, v, js)
		}
	}
	master := reflect.TypeFor[ServiceMaster]()
	for i := range master.NumField() {
		f := master.Field(i)
		if strings.HasPrefix(f.Name, "Pad") {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			v := base
			setNonZero(reflect.ValueOf(&v.ServiceMaster).Elem().Field(i))
			check(t, 0, v)
		})
	}
	t.Run("RevNatID", func(t *testing.T) {
		v := base
		v.RevNatID = 0x01020304
		check(t, 0, v)
	})
	t.Run("BackendID", func(t *testing.T) {
		check(t, 3, ServiceValue{BackendID: 0x01020304})
		check(t, 3, ServiceValue{BackendID: BackendReject})
	})
}

// loadThroughJSON writes d as JSON, as an agent serves it, reads it back
// and loads it into new in-memory maps, as lbctl does.
func loadThroughJSON(t *testing.T, d *Dump) (*Maps, []byte) {
	t.Helper()
	js, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Dump
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	m, err := NewMemoryMaps(DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := LoadDump(m, &back, nil); err != nil {
		t.Fatal(err)
	}
	return m, js
}

// The same for lb_backends: each field of Backend shows in the text dump
// and comes back from the JSON dump through LoadDump.
func TestCodecCoversEveryBackendField(t *testing.T) {
	base := NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP")}, 0)
	base.ID = 5
	text := func(b Backend) string {
		var out bytes.Buffer
		if err := (&Dump{Backends: []BackendEntry{{b}}}).WriteText(&out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	typ := reflect.TypeFor[Backend]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if strings.HasPrefix(f.Name, "Pad") {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			b := base
			if f.Name == "Proto" { // a protocol the address's text can carry
				b.Proto = uint8(lb.ProtoUDP)
			} else {
				setNonZero(reflect.ValueOf(&b).Elem().Field(i))
			}
			if got, was := text(b), text(base); got == was {
				t.Errorf("the text dump does not show the field: %q", got)
			}
			m, js := loadThroughJSON(t, &Dump{Backends: []BackendEntry{{b}}})
			got, ok, err := m.Backends.Lookup(b.ID)
			if err != nil || !ok || got != b {
				t.Errorf("after JSON and LoadDump: %+v (found %v, %v), want %+v (JSON %s)", got, ok, err, b, js)
			}
		})
	}
}

// The same for the entries of lb_rev_nat, lb_src_range and lb_affinity,
// through their field lists: each field of the struct changes the text
// dump (but those the text leaves out on purpose) and comes back from
// the JSON.
func TestCodecCoversEveryFieldOfTheOtherMaps(t *testing.T) {
	t.Run("RevNatValue", func(t *testing.T) {
		v := NewRevNatValue(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"))
		v.ID = 3
		// Protocol and scope are for restore, not the text.
		checkFieldsCovered(t, revNatFields, v, map[string]bool{"Proto": true, "Scope": true}, nil)
	})
	t.Run("SourceRangeKey", func(t *testing.T) {
		// A prefix length must fit the address: give it one of a /16.
		fix := map[string]func(*SourceRangeKey){"PrefixLen": func(k *SourceRangeKey) { k.PrefixLen = 32 + 96 + 16 }}
		checkFieldsCovered(t, sourceRangeFields, NewSourceRangeKey(7, netip.MustParsePrefix("10.0.0.0/8")), nil, fix)
	})
	t.Run("AffinityEntry", func(t *testing.T) {
		e := AffinityEntry{AffinityKey{Client: netip.MustParseAddr("192.0.2.1").As16(), RevNatID: 4}, AffinityValue{BackendID: 9}}
		checkFieldsCovered(t, affinityFields, e, map[string]bool{"LastUsed": true, "Slot": true}, nil)
	})
}

// checkFieldsCovered sets each field of base (but the padding) in turn,
// with fix's setter if it has one, and checks that the text shows it
// (unless textless says not) and that the JSON round trip keeps it.
func checkFieldsCovered[V any](t *testing.T, fields []field[V], base V, textless map[string]bool, fix map[string]func(*V)) {
	t.Helper()
	text := func(v V) string { return string(appendText(nil, fields, &v)) }
	leaves := 0
	var visit func(path []int, typ reflect.Type)
	visit = func(path []int, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			p := append(slices.Clone(path), i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				visit(p, f.Type)
				continue
			}
			if strings.HasPrefix(f.Name, "Pad") {
				continue
			}
			leaves++
			t.Run(f.Name, func(t *testing.T) {
				v := base
				if set, ok := fix[f.Name]; ok {
					set(&v)
				} else {
					setNonZero(reflect.ValueOf(&v).Elem().FieldByIndex(p))
				}
				if got, was := text(v), text(base); got == was && !textless[f.Name] {
					t.Errorf("the text dump does not show the field: %q", got)
				}
				js, err := marshalObject(fields, &v)
				if err != nil {
					t.Fatal(err)
				}
				var back V
				if err := unmarshalObject(fields, &back, js); err != nil || !reflect.DeepEqual(back, v) {
					t.Errorf("JSON %s gives %+v (%v), want %+v", js, back, err, v)
				}
			})
		}
	}
	visit(nil, reflect.TypeFor[V]())
	if leaves == 0 {
		t.Fatal("no fields")
	}
}

// setNonZero gives f a value other than the one base gives it, with a
// bit set in each byte (a flag, a byte of a port).
func setNonZero(f reflect.Value) {
	switch f.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(f.Uint() ^ 0x0102030405060708&(1<<(8*f.Type().Size())-1))
	case reflect.Array:
		for i := range f.Len() {
			setNonZero(f.Index(i))
		}
	default:
		panic("setNonZero: " + f.Kind().String())
	}
}

// A dump's JSON keeps its shape: one object per entry, the frontend and
// slot, then the fields that are not zero under their JSON names; a
// backend's ID, address and state, then its other fields that are not
// zero.
func TestServiceEntryJSON(t *testing.T) {
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	v := ServiceValue{RevNatID: 7, ServiceMaster: ServiceMaster{Count: 2, Type: uint8(lb.SVCTypeNodePort), Algorithm: AlgorithmMaglev,
		Flags: FlagAffinity | FlagProxy, ProxyPort: [2]byte{0x3a, 0x98}, AffinityTimeout: 30}}
	for _, c := range []struct {
		e    ServiceEntry
		want string
	}{
		{NewServiceEntry(NewServiceKey(fe, 0), v),
			`{"frontend":"10.96.0.1:80/TCP","slot":0,"revNatID":7,"type":"NodePort","algorithm":"maglev","count":2,"affinityTimeout":30,"proxyPort":15000,"flags":["affinity","proxy"]}`},
		{NewServiceEntry(NewServiceKey(fe, 2), ServiceValue{BackendID: 9, RevNatID: 7}),
			`{"frontend":"10.96.0.1:80/TCP","slot":2,"backendID":9}`},
	} {
		got, err := json.Marshal(c.e)
		if err != nil || string(got) != c.want {
			t.Errorf("got %s (%v), want %s", got, err, c.want)
		}
	}
	b := BackendEntry{NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("[fd00::2]:8443/TCP"), State: lb.BackendTerminating, ClusterID: 3}, 0)}
	b.ID = 2
	want := `{"id":2,"address":"[fd00::2]:8443/TCP","state":"terminating","clusterID":3}`
	if got, err := json.Marshal(b); err != nil || string(got) != want {
		t.Errorf("got %s (%v), want %s", got, err, want)
	}
	var e ServiceEntry
	err := json.Unmarshal([]byte(`{"frontend":"10.96.0.1:80/TCP","slot":0,"algorithm":"round-robin"}`), &e)
	if err == nil || !strings.Contains(err.Error(), `10.96.0.1:80/TCP slot 0: algorithm: unknown algorithm "round-robin"`) {
		t.Errorf("an unknown algorithm gives %v", err)
	}
}
