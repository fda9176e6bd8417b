package bpf_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// dumpTestConfig keeps Maglev tables small.
func dumpTestConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBMaglevTableSize = 251
	return cfg
}

// fillForDump writes one entry of every kind the dump shows, with every
// field of a master entry set, and returns the Maglev table of rev-NAT 1.
func fillForDump(t *testing.T, m *bpf.Maps) []uint32 {
	t.Helper()
	fe4 := lb.MustParseL3n4Addr("192.0.2.9:443/TCP")
	fe6 := lb.MustParseL3n4Addr("[2001:db8::9]:53/UDP")
	table := make([]uint32, m.Maglev.TableSize())
	for i := range table {
		table[i] = uint32(1 + i%3%2) // backend 1 twice as often as 2
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(m.Backends.Update(1, bpf.NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:8443/TCP"), ClusterID: 3}, 2)))
	check(m.Backends.Update(2, bpf.NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("[fd00::2]:8443/TCP"), State: lb.BackendTerminating}, 0)))
	check(m.Maglev.Update(1, table))
	check(m.RevNat.Update(1, bpf.NewRevNatValue(fe4)))
	check(m.RevNat.Update(2, bpf.NewRevNatValue(fe6)))
	check(bpf.WriteService(m.Services, fe4, bpf.ServiceValue{RevNatID: 1, ServiceMaster: bpf.ServiceMaster{Count: 1, Standby: 1, AffinityTimeout: 600,
		Type: uint8(lb.SVCTypeLoadBalancer), Algorithm: bpf.AlgorithmMaglev, Flags: bpf.FlagAffinity | bpf.FlagSourceRanges | bpf.FlagExtLocal}}, []uint32{1, 2}))
	check(m.Services.Update(bpf.NewServiceKey(fe6, 0), bpf.ServiceValue{RevNatID: 2, ServiceMaster: bpf.ServiceMaster{Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}}))
	check(m.SourceRanges.Update(bpf.NewSourceRangeKey(1, netip.MustParsePrefix("198.51.100.0/24")), 1))
	check(m.SourceRanges.Update(bpf.NewSourceRangeKey(1, netip.MustParsePrefix("2001:db8:1::/48")), 1))
	check(m.Affinity.Update(bpf.AffinityKey{Client: netip.MustParseAddr("198.51.100.20").As16(), RevNatID: 1}, bpf.AffinityValue{BackendID: 2}))
	return table
}

// servedMaps runs fn with filled in-memory maps, and with filled kernel
// maps when the process may create them.
func servedMaps(t *testing.T, fn func(t *testing.T, m *bpf.Maps, table []uint32)) {
	t.Run("memory", func(t *testing.T) {
		m, err := bpf.NewMemoryMaps(dumpTestConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, m, fillForDump(t, m))
	})
	t.Run("kernel", func(t *testing.T) {
		cfg := dumpTestConfig()
		cfg.LBPinDir = bpftest.Config(t).LBPinDir
		m := bpftest.KernelMaps(t, cfg)
		fn(t, m, fillForDump(t, m))
	})
}

func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestDumpHandlerServesWriteJSON(t *testing.T) {
	servedMaps(t, func(t *testing.T, m *bpf.Maps, _ []uint32) {
		d, err := bpf.TakeDump(m)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		d.WriteJSON(&want)
		rec := get(t, bpf.DumpHandler(m), http.MethodGet, "/maps")
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		if rec.Body.String() != want.String() {
			t.Fatalf("served:\n%s\nWriteJSON:\n%s", rec.Body, want.String())
		}
	})
}

// A dump served with its Maglev tables and loaded into fresh maps gives
// back the same dump and the same tables.
func TestDumpRoundTripsThroughLoadDump(t *testing.T) {
	servedMaps(t, func(t *testing.T, m *bpf.Maps, table []uint32) {
		srv := httptest.NewServer(bpf.DumpHandler(m))
		defer srv.Close()
		resp, err := http.Get(srv.URL + "?maglev=1&maglev=99")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var served bpf.DumpWithTables
		if err := json.NewDecoder(resp.Body).Decode(&served); err != nil {
			t.Fatal(err)
		}
		if len(served.MaglevTables) != 1 || !slices.Equal(served.MaglevTables[1], table) {
			t.Fatalf("tables served: %v", served.MaglevTables)
		}

		loaded, err := bpf.NewMemoryMaps(dumpTestConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := bpf.LoadDump(loaded, &served.Dump, served.MaglevTables); err != nil {
			t.Fatal(err)
		}
		want, _ := bpf.TakeDump(m)
		got, err := bpf.TakeDump(loaded)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			var g, w bytes.Buffer
			got.WriteText(&g)
			want.WriteText(&w)
			t.Fatalf("loaded:\n%s\noriginal:\n%s", g.String(), w.String())
		}
		if got, _, _ := loaded.Maglev.Lookup(1); !slices.Equal(got, table) {
			t.Fatal("the loaded Maglev table differs from the original")
		}
	})
}

func TestLoadDumpLeavesOutMaglevEntriesWithoutTables(t *testing.T) {
	m, _ := bpf.NewMemoryMaps(dumpTestConfig(), nil)
	fillForDump(t, m)
	d, _ := bpf.TakeDump(m)
	loaded, _ := bpf.NewMemoryMaps(dumpTestConfig(), nil)
	if err := bpf.LoadDump(loaded, d, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := loaded.Maglev.Lookup(1); ok {
		t.Error("a Maglev table was made up from the dump's counts")
	}
	if _, ok, _ := loaded.Backends.Lookup(1); !ok {
		t.Error("backend 1 was not loaded")
	}
}

func TestLoadDumpRejectsATableThatDoesNotMatch(t *testing.T) {
	m, _ := bpf.NewMemoryMaps(dumpTestConfig(), nil)
	table := fillForDump(t, m)
	d, _ := bpf.TakeDump(m)
	stale := slices.Clone(table)
	stale[0] = 2 // one slot moved to another backend
	loaded, _ := bpf.NewMemoryMaps(dumpTestConfig(), nil)
	err := bpf.LoadDump(loaded, d, map[uint32][]uint32{1: stale})
	if err == nil || !strings.Contains(err.Error(), "changed while being read") {
		t.Fatalf("got %v", err)
	}
}

// churningMaglev returns a table other than the one Iterate shows, as if
// the reconciler replaced it between the dump and the table's read.
type churningMaglev struct{ bpf.MaglevMap }

func (c churningMaglev) Lookup(id uint32) ([]uint32, bool, error) {
	table, ok, err := c.MaglevMap.Lookup(id)
	if ok {
		table = slices.Clone(table)
		table[0] += 7
	}
	return table, ok, err
}

func TestDumpHandlerErrors(t *testing.T) {
	m, _ := bpf.NewMemoryMaps(dumpTestConfig(), nil)
	fillForDump(t, m)
	h := bpf.DumpHandler(m)
	if rec := get(t, h, http.MethodPost, "/maps"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/maps?maglev=web"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want a rev-NAT ID") {
		t.Errorf("maglev=web: status %d, %s", rec.Code, rec.Body)
	}

	m.Maglev = churningMaglev{m.Maglev}
	rec := get(t, bpf.DumpHandler(m), http.MethodGet, "/maps?maglev=1")
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(string(body), "changed during each of 3 reads") {
		t.Errorf("churning tables: status %d, %s", rec.Code, body)
	}
}
