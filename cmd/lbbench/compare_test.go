package main

import (
	"bytes"
	"strings"
	"testing"
)

// Cilium's benchmark output, in the shape its Printf calls give it.
const ciliumOutput = `Iteration 0: upsert table check succeeded wait ok.

Memory statistics from N=3 iterations:
Min: Allocated 340000kB in total, 1500000 objects / 120000kB still reachable (per service:  30 objs,  6963B alloc,  2457B in-use)
Avg: Allocated 350000kB in total, 1520000 objects / 122000kB still reachable (per service:  31 objs,  7168B alloc,  2498B in-use)
Max: Allocated 360000kB in total, 1540000 objects / 124000kB still reachable (per service:  31 objs,  7372B alloc,  2539B in-use)

Insert statistics from N=3 iterations:
Min: Reconciled 50000 objects in 2.4s        (48µs     per service /  20833 services per second)
Avg: Reconciled 50000 objects in 2.5s        (50µs     per service /  20000 services per second)
Max: Reconciled 50000 objects in 2.6s        (52µs     per service /  19230 services per second)

Delete statistics from N=3 iterations:
Min: Reconciled 50000 objects in 1.2s        (24µs     per service /  41666 services per second)
Avg: Reconciled 50000 objects in 1.25s       (25µs     per service /  40000 services per second)
Max: Reconciled 50000 objects in 1.3s        (26µs     per service /  38461 services per second)
`

// The anchor's averages are read from each section, and the ratios are
// ours over theirs.
func TestCompareReadsCiliumAverages(t *testing.T) {
	a, err := parseAnchor(ciliumOutput)
	if err != nil {
		t.Fatal(err)
	}
	if want := (anchor{Insert: 20000, Delete: 40000, Bytes: 2498, Objects: 31}); a != want {
		t.Fatalf("anchor %+v, want %+v", a, want)
	}
	var out bytes.Buffer
	c := compare(result{InsertServicesPerSecAv: 80000, DeleteServicesPerSecAv: 60000, BytesInUsePerService: 1249, ObjectsPerService: 15.5}, a, &out)
	if c.Insert != 4 || c.Delete != 1.5 || c.Bytes != 0.5 || c.Objects != 0.5 {
		t.Errorf("ratios %+v", c)
	}
	if !strings.Contains(out.String(), "insert 80000 vs 20000 services/s = 4.00x") {
		t.Errorf("printed %q", out.String())
	}
}

// A saved lbbench -json line is an anchor too; anything else is refused
// with what is expected.
func TestCompareInputs(t *testing.T) {
	a, err := parseAnchor("lbbench: ...\n" + `{"insert_services_per_sec_avg":1,"delete_services_per_sec_avg":2,"bytes_in_use_per_service":3,"objects_per_service":4}` + "\n")
	if err != nil || a != (anchor{1, 2, 3, 4}) {
		t.Errorf("json anchor %+v, %v", a, err)
	}
	if _, err := parseAnchor("Insert statistics\nnothing here\n"); err == nil || !strings.Contains(err.Error(), "want Cilium's benchmark output") {
		t.Errorf("bad anchor: %v", err)
	}
}
