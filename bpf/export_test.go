package bpf

// LayoutNames returns the names of the maps in the layout, for the
// external tests.
func LayoutNames() []string {
	var names []string
	for _, d := range layout {
		names = append(names, d.name)
	}
	return names
}

// LoadBenchDatapath loads the benchmark's programs of c/bench.h over m.
func LoadBenchDatapath(m *Maps, reports bool) (*Datapath, error) {
	opts := DefaultDatapathOptions
	opts.ConnectionReports = reports
	return loadDatapathPrograms(m, opts, "lb_bench_est", "lb_bench_new", "lb_bench_copy", "lb_bench_copy_new")
}

// LoadBenchDatapathOptions is LoadBenchDatapath with opts.
func LoadBenchDatapathOptions(m *Maps, opts DatapathOptions) (*Datapath, error) {
	return loadDatapathPrograms(m, opts, "lb_bench_est", "lb_bench_new", "lb_bench_copy", "lb_bench_copy_new")
}

// LoadProbeDatapath loads the torn-read probe of c/probe.h over m.
func LoadProbeDatapath(m *Maps) (*Datapath, error) {
	return loadDatapathPrograms(m, DefaultDatapathOptions, "lb_probe_slots")
}

// ConnEventSize is the size of struct lb_conn_event the decoder reads.
const ConnEventSize = connEventSize

// CTPortsShared returns how many lb_ct maps have client port arrays that
// loaded datapaths share (ctports.go).
func CTPortsShared() int {
	ctPortsMu.Lock()
	defer ctPortsMu.Unlock()
	return len(ctPortsOf)
}

// WithMasterRechecks returns opts with the first n tries of every read
// of a master failing, as if the kernel had rewritten the element under
// it (master.h, lb_read_master): such a rewrite is a write the read
// overlaps, so every read is guarded.
func WithMasterRechecks(opts DatapathOptions, n uint32) DatapathOptions {
	opts.masterRechecks = n
	opts.writeOverlaps = true
	return opts
}

// WithGuardedRechecks returns opts with the first n tries of every
// guarded read of a master failing: a read that no write overlaps, which
// takes one lookup, does not see them.
func WithGuardedRechecks(opts DatapathOptions, n uint32) DatapathOptions {
	opts.masterRechecks = n
	return opts
}

// WithWriteDuringRead returns opts with a write of lb_services done, as
// if by another CPU, between every one-lookup read's copy of a master
// and its second read of lb_services_seq (master.h, lb_read_master).
func WithWriteDuringRead(opts DatapathOptions) DatapathOptions {
	opts.writeDuringRead = true
	return opts
}

// SetWeakMemoryOrder has the datapaths loaded from now on fence their
// reads of lb_services_seq as on CPUs that reorder loads, or not; it
// returns the setting before.
func SetWeakMemoryOrder(weak bool) bool {
	was := weakMemoryOrder
	weakMemoryOrder = weak
	return was
}
