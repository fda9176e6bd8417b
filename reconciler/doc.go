// Package reconciler writes the frontends table into the datapath's BPF
// maps (bpf.Maps): each frontend's backends, Maglev table, backend slots,
// master and reverse-NAT entries, source ranges, and the cleanup of
// affinity entries. It runs statedb's reconciler over the table, records
// each frontend's status and ID back into it, and retries failures with
// backoff. An agent adds Cell beside tables.Cell and bpf.Cell.
//
// What the datapath may rely on, and where each promise is kept:
//
//   - Write order (batch.go, its opening comment): a packet never sees a
//     frontend half-written. Backends go in before anything names them,
//     slot entries before the master that counts them; deletion runs the
//     other way. The first bpf.InlineSlots slots live in the master
//     itself, so a change of one of them is a write of the master, and a
//     frontend takes 1 + max(0, slots - InlineSlots) lb_services entries
//     (room.go counts that). Every change of a batch goes through the same phases, so that
//     a batch costs a few batched syscalls.
//   - Reference counts (ops.go, state.go): one lb_backends entry per address, shared
//     by every frontend that uses it. A frontend's backend set holds its
//     old and new backends until nothing it wrote names the old ones; an
//     entry is deleted only when no frontend holds it, and its value
//     (backendValue) depends on every frontend's view, not on which was
//     reconciled last.
//   - States (arena.go, state.go): what the reconciler knows of each
//     frontend and backend lives in arenas of fixed-size structs, found by
//     address through maps of pointer-free keys (addrmap.go), so that
//     tens of thousands of them cost no allocation each; a backend's
//     state keeps its address, so backends are found through a table of
//     their arena indexes alone (keyindex.go: a state must leave it
//     before its index is released).
//   - IDs (ids.go): handed out in increasing order, so a freed ID is not
//     reused while conntrack or affinity entries may still carry it. The
//     allocators record a mark in lb_id_marks to keep that promise across
//     restarts.
//   - Restore (restore.go): at start the pinned maps are read back and
//     every address gets its old ID when a source declares it again. A
//     restored frontend holds references on the backends its slots name
//     (lb_backends is read beside the other maps, restore_backends.go),
//     and IDs found only in other maps stay reserved until a prune. What
//     the maps hold is recorded as known (masters, slots, rev-NAT
//     entries, backends; a Maglev table is compared when first
//     written), so a restart over the same declarations writes no entry
//     (lbstate_map_writes_total, writes.go).
//   - Prune only after init (prune.go): statedb calls Prune only once
//     the frontends table is initialized, that is, once every source that
//     registered an initializer with the Writer has synced. Until then a
//     backend no frontend uses is parked, entry and ID kept, not deleted.
//     A failed prune is retried with backoff (pruneRetryMin); a backend
//     ID that restore dropped for another of its address stays while a
//     slot names it, and is looked at alone (checkDropped), not with a
//     prune of every map, until none does; then its entry goes with the
//     affinity pins that name it (the datapath may pin clients to it
//     while a slot names it), and only then is the ID freed. The first
//     prune after a restart deletes, of the entries restore read, those
//     that nobody accounts for (leftovers.go), rather than reading every
//     map again; the later ones read the maps. Each prune counts the
//     maps again after it (room.go), but the first after a restart whose
//     restore found nothing left over and the counts equal to what its
//     states say may be there (leftovers.exact).
//   - Room (room.go, waiting.go): a frontend is written only if it fits
//     in the room left in the maps, which the reconciler counts; one that
//     does not writes nothing and waits. Frontends in the maps keep their
//     entries; free room goes to the others by frontend ID, lowest
//     (oldest) first, and room that frees is held for the waiting ones
//     that fit and offered to them at once. A frontend ID holds a slot of
//     lb_rev_nat: when none is free a frontend gets no ID and waits too,
//     in the order it came (idwait.go). A frontend that starts waiting,
//     or failing, is counted once, not once per retry (metrics.go).
//     Counting the maps again also counts what the states may still
//     write there (a failed write's entries, which its retry writes
//     without counting them again: room_absent.go).
//   - Batch failures (batch.go, ops.go): a batched syscall may fail after
//     applying a prefix of its entries. Whatever it touched is then marked
//     unknown and written again by the retry; the frontends that had a
//     part in it fail and drop out of the later phases; the others go on.
//
// Traps for an embedder:
//
//   - A source that registers an initializer and never marks it done stops
//     every prune: stale entries stay in the maps for good.
//   - Nothing else may write these maps: a prune deletes any entry no
//     frontend accounts for, and entries another writer adds or deletes
//     put the reconciler's count of the room off until it counts again
//     (after a failed write, a map the kernel found full, a prune, or
//     before refusing a frontend on counts over a second old).
//   - Every node must use the same Maglev table size (bpf.Config) and seed
//     (--lb-maglev-seed), or flows move between backends as they move
//     between nodes.
//   - The ops are called from statedb's reconciler goroutine, and from
//     timers that retry (checkDropped) under the mutex every entry
//     point takes; the mutex is also for the readers (tests, IDs).
//
// WaitReconciled waits until a revision of the frontends table is in the
// maps, for tests and tools that write and then read the maps.
package reconciler
