// Package bpf holds lbstate's map ABI (include/lb.h and the Go structs
// that match it byte for byte), the maps the reconciler writes, as kernel
// BPF maps pinned in bpffs or as in-memory maps that behave alike, and
// the dump format tests and lbctl compare them by.
//
//	maps, err := bpf.NewKernelMaps(bpf.DefaultConfig) // or bpf.NewMemoryMaps(cfg, nil)
//	if err != nil {
//		return err
//	}
//	defer maps.Close() // the maps stay pinned
//	err = maps.Backends.Update(1, bpf.NewBackend(ref, 0))
//
// Every map is declared once, in layout.go; both implementations are
// built from that table.
//
// # One definition of each map's key and value
//
// Each key and value of include/lb.h has one Go struct (abi.go,
// datapath_abi.go, flowhash.go), which TestABIMatchesC checks field by field
// (names, offsets, sizes) against the types bpf2go generated from the
// committed object's BTF: no clang at test time; TestLayoutMatchesObject
// checks that each map binds the struct its BTF names. The entries of the
// maps a dump shows have one codec each, a field list in abi.go
// (masterFields and slotFields, backendFields, revNatFields,
// sourceRangeFields, affinityFields) from which the text dump, the JSON
// dump an agent serves (DumpHandler) and LoadDump all follow, and so
// lbctl maps, and lbctl explain over an agent's API. The reconciler
// builds and compares the same structs: it keeps a ServiceMaster of what
// it wrote, and a beValue beside a backend's address; restore reads them.
//
// # Adding a field to a map
//
// A field of lb_services' master entry touches these files:
//
//  1. include/lb.h: the field in struct lb_service_value, in its pad byte
//     or before gen (which stays last: the datapath's guarded copy,
//     lb_read_master, stops at it), with what it means. Growing the
//     value is a layout change: migrate.go converts the pins of the
//     size before. Run go generate ./bpf (clang) and commit the
//     regenerated lb_bpfel.* and datapath_bpfel.*.
//  2. abi.go: the field in ServiceMaster, in C's order, and its line in
//     masterFields (its name in dumps; optional, if existing dumps where
//     it is zero should not change). TestABIMatchesC and
//     TestCodecCoversEveryField fail until both are there.
//  3. reconciler/master.go: task.master derives it from the frontend.
//     writeMasters rewrites a master entry whenever any field changes;
//     restore and pruning need nothing.
//  4. c/select.h (or sock.h, tc.h): what the reference datapath does
//     with it, if anything.
//  5. a test: a script under testdata/ whose dump shows the field. The
//     scripts compare whole dumps, so every script with a frontend where
//     the field is not zero shows it: make zero mean "as before" and the
//     field optional, and only the scripts that exercise it change. A
//     datapath_*_test.go for step 4.
//  6. docs/maps-and-reconciler.md: the lb_services row of the map table.
//
// lbctl explain (cmd/lbctl/explain.go) prints the field only if told to;
// lbctl maps shows it without a change. ServiceMaster is 16 bytes, one
// of them the pad: a field that grows it grows every frontend's state in
// the reconciler, and reconciler/arena_test.go, which pins that size,
// must be changed knowingly.
//
// Tried with a throwaway byte in the pad: lb.h, abi.go, master.go and
// the two topology scripts whose frontends had it set, besides the
// regenerated bindings (and the docs row).
//
// A field of lb_backends: struct lb_backend in include/lb.h; Backend,
// BackendOf, NewBackend (if lb.BackendRef carries it) and backendFields
// in abi.go; reconciler/views.go, where each frontend's view of a backend
// and the one value they make (beValue) live; then steps 4 to 6 as
// above. A
// field of lb_affinity (which the datapath writes): lb.h, the struct and
// affinityFields in abi.go, and the datapath that writes it. The
// reference datapath's own maps (lb_ct, lb_counters, lb_drops:
// datapath_abi.go), which dumps leave out, need lb.h, their struct and
// their reader.
//
// # Write order
//
// Which order keeps packets safe (backends before the slots that name
// them, a Maglev table before the master entry that selects it) is the
// reconciler's business; see reconciler/batch.go. This package gives it
// operations on single entries, and on whole Maglev tables, and the
// layout of slots (inline.go): slots 1..InlineSlots live in the master
// entry's Backends, later slots in entries of their own; WriteService
// writes one frontend in the safe order, SlotBackend reads a slot as
// the datapath does, and dumps show every slot as an entry wherever it
// lives.
//
// # Pinning and layout
//
// NewKernelMaps pins each map by name in Config.LBPinDir, which must be on
// bpffs, and reopens the pins it finds there, so that a restarted agent
// keeps the entries, and the IDs, that live connections use. Close does
// not unpin: the maps live until their pins are removed.
//
// A pinned map must match this version's map exactly: type, key and value
// sizes, flags and max_entries. Changing a capacity flag (--lb-*-max) or
// --lb-maglev-table-size on a node that has pinned maps therefore fails
// with an error wrapping ebpf.ErrMapIncompatible and naming
// --lb-recreate-maps, which recreates the mismatched maps empty, and only
// those: their entries are lost, other maps are kept, and Maps.Recreated
// says which and why (Cell logs each at WARN). A reader of IDs should take
// them from the maps kept: lb_rev_nat holds every frontend ID. The
// Maglev table size is checked on the inner maps, by looking at one, or,
// with none, by trying to insert one. One exception keeps upgrades
// painless: a map whose capacity flag is left at its default and that
// differs from the spec in max_entries alone (pinned by a version with
// other defaults) is opened at its pinned size, with its entries;
// Maps.KeptSizes lists it and Cell logs it, with how to resize it. And
// lb_services pinned by a version before inline slots (a master entry
// holding its first InlineSlots slots, inline.go), or before master
// generations (ServiceValue.Gen, services.go), is migrated, not
// refused: its entries are written in the new layout into a new map
// whose pin replaces the old one in one rename, so every ID, slot and
// established flow survives the upgrade (migrate.go; Maps.Migrated,
// logged by Cell). The new map has the size the configuration gives
// (the old map's if larger and the size is left at its default), so
// that the next start opens it. Cell never falls back to in-memory
// maps on this error: the agent would silently stop programming the
// datapath.
//
// The pin directory belongs to one agent: the reconciler restores IDs
// from everything in it and prunes what none of its frontends claims, so
// two agents sharing one would delete each other's entries. NewKernelMaps
// therefore holds an flock on the directory while its Maps are open, and
// a second process is refused with ErrPinDirInUse, naming the holder's
// PID (from /proc/locks); the kernel drops the lock when its holder dies,
// so a crashed agent blocks nothing. For the same reason NewKernelMaps
// refuses (ErrPinDirUntrusted) a pin directory, or a pin in it, that
// belongs to another user or that its group or others may write (bpffs
// is often mode 1777: anyone may create the directory first). Tools read
// it with OpenPinnedMaps, which creates nothing, takes no lock and makes
// the same ownership checks. On a fresh machine Cell mounts
// bpffs on the pin directory's parent (by default /sys/fs/bpf) when that
// is an empty directory off bpffs; it never mounts over files and never
// unmounts.
//
// Kernel maps need root: CAP_BPF to create maps, CAP_SYS_ADMIN to open
// lb_maglev's inner maps by ID (every Maglev read does) and to mount
// bpffs.
//
// # Preallocation
//
// lb_services and lb_src_range are created with BPF_F_NO_PREALLOC: their
// capacities are sized for the largest cluster but memory is taken per
// entry, on insert. The price is that an insert can fail with ENOMEM
// under memory pressure, below capacity; that is not ErrMapFull. LPM
// tries require the flag; LRU maps refuse it, so lb_affinity takes its
// whole capacity up front, as the arrays lb_backends and lb_rev_nat (dense
// ID maps, see slotted.go) and lb_id_marks do.
//
// # Full maps and LRU eviction
//
// A full hash map or trie refuses a new key with a *MapFullError, which
// names the map and matches ErrMapFull (the kernel says E2BIG or ENOSPC);
// keys it holds can still be updated. Maps.Capacity tells each map's
// max_entries and the flag that sets it, for the error messages and the
// room accounting of a writer. lb_affinity is an LRU map, written by
// the datapath: when full, an insert evicts some entry instead of
// failing, so no entry is guaranteed to stay.
//
// # Maglev tables
//
// lb_maglev maps a frontend ID to an inner array with a single element:
// the whole table. MaglevMap.Update fills a new inner map and swaps it in
// with one update of the outer map, so the datapath sees the old table or
// the new one, never a mix. Inner maps are not pinned; each lives while
// the outer map refers to it. A read opens an inner map by ID, which a
// concurrent swap may free first; Lookup then starts over.
//
// # Batches
//
// BatchUpdate and BatchDelete use the kernel's batch syscalls, falling
// back to one syscall per entry for maps without them (the LPM trie). On
// error a prefix of the batch may have been applied. BatchDelete steps
// over missing keys, where the kernel's batch stops at the first one.
//
// # The reference datapath
//
// c/datapath.c is a datapath over these maps (README: "The reference
// datapath"); LoadDatapath loads it over kernel maps, replacing the
// object's maps with the agent's and sizing the Maglev index bound from
// the inner tables, and Datapath attaches it. It writes lb_ct,
// lb_sock_ct, lb_affinity, lb_counters and lb_drops, which are in the
// layout like the others (pinned, sized by flags) but which the
// reconciler never writes: Maps.Counters and Maps.Drops hold one value
// per possible CPU. Its flow hash is lb_flow_hash of include/lb.h,
// keyed by the node's seed (lb_flow_seed, which NewKernelMaps makes once,
// random, and which stays pinned); FlowSeed.FlowHash is the Go twin,
// tested against the kernel's. A flow has one conntrack entry, keyed by
// its client (NewCTClientKey), or, when it cannot, two keyed by each
// direction's 5-tuple (NewCTKey; include/lb.h says when). Its entries
// expire by TCP state (CTTimeouts, LoadDatapathOptions), and
// CollectConntrack deletes the expired ones (the datapath cell runs it
// periodically; each in one step with its read, and one the datapath
// renewed since the walk written back: DeleteStale), keeping and
// writing the client entries that flows with two entries need (LoadDatapath marks those of an older datapath's
// flows: MarkConntrack); both also tell the programs the client ports
// of lb_ct's flows, which they keep in arrays of their own
// (lb_dp_ct_ports, lb_dp_ct_pair_ports, shared by the datapaths this
// process loads over one lb_ct) to skip lookups that would miss and to
// find flows with two entries whose client entry the LRU took. It translates
// every packet of a balanced flow: fragments (the first one's ports kept
// in lb_dp_frags, a map of its own), IPv6 extension headers, and ICMP
// errors quoting the flow. DestroyOrphanedUDPSockets destroys connected
// UDP sockets whose backend is gone. It fixes the L4 checksum of a packet
// that carries it as a plain field in place, with no helper call (Linux
// 6.3+, bpf_cast_to_kern_ctx; the programs need the kernel's BTF), and an
// offloaded or CHECKSUM_COMPLETE one through the kernel's helpers.
//
// A program copies a value of lb_backends or lb_rev_nat while the agent
// may rewrite its slot; it re-reads the slot's ID after the copy. That
// is safe only because Maps.Backends and Maps.RevNat never change the ID
// and the fields of a slot that ever held an ID in one write (slotted.go):
// another writer of these arrays must keep that rule too. A slot of
// lb_backends that never held one is filled in one write (no program
// looks a backend ID up before its entry is written); a restore marks
// the slots of the IDs it found in other maps as held (MarkSlotsUsed).
//
// lb_services is a hash map, whose freed elements the kernel hands to
// the next insert at once (Linux 6.1+): a program keeps a copy of a
// master only if two lookups around it found the same element with the
// same generation (ServiceValue.Gen; c/master.h, lb_read_master). Kernel
// Maps stamp every master they write with a generation no other write
// carries, and hide it from their callers (services.go): another writer
// of lb_services must do the same, or the datapath may act on a torn
// master.
//
// That guarded read costs three lookups; the datapath takes it only when
// a write may have overlapped its read. Every writer of lb_services
// announces each write in lb_services_seq (Maps.ServicesSeq, Seq;
// servicesseq.go), before and after it, and a read that found no write
// in flight and none done around its one lookup is trusted. Maps.Services
// brackets each of its writes. An embedder that writes lb_services by
// other means must bracket every write with ServicesSeq.BeginWrite and
// EndWrite: the datapath cannot see an unbracketed write, and may then
// balance a flow on a torn master or pass one whose master it missed.
//
// # In-memory maps
//
// NewMemoryMaps mimics the kernel maps: capacities and ErrMapFull, LRU
// eviction (of an arbitrary entry, not the least recently used one), the
// trie's longest-prefix lookup, the array's fixed indexes (every one
// exists, zero until written; none can be deleted), whole-table Maglev
// updates (the map keeps a copy), batches, and error messages that name
// the map. It does not mimic memory limits, iteration order (neither
// implementation has one), or the datapath, which writes lb_affinity in
// the kernel. A FaultHook makes its mutating operations fail on demand;
// bpftest.Faults fails them at random.
package bpf
