/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a master entry of lb_services: in one lookup when no write of
 * the map overlapped the read, guarded otherwise. Included by select.h.
 */
#ifndef __LBSTATE_MASTER_H
#define __LBSTATE_MASTER_H

/*
 * Reused lb_services elements. lb_services is a hash map without
 * preallocation: a rewrite of an entry inserts a new element and frees
 * the old one, a delete frees it, and since Linux 6.1 a freed element
 * goes to its CPU's free list of the BPF memory allocator, from which
 * the very next insert on that CPU takes it (kernel/bpf/hashtab.c,
 * memalloc.c), for any key. A program runs under RCU, so the pointer
 * bpf_map_lookup_elem gave stays memory of this map, but what it points
 * at may be rewritten under the program's copy: half one master and half
 * another frontend's, or half the old and half the new master of its own
 * frontend (the element freed by one rewrite taken by the next). The
 * kernel writes an element only while no lookup can find it: it copies
 * key and value in, then links it into its bucket.
 *
 * A read that a write may overlap (lb_read_master, below: most reads
 * see none) copies a master only between two lookups that find the
 * same element, reading its generation (lb_service_value.gen, which no
 * two writes share) before the first and after the second: equal, no
 * write touched the element in between, so the copy is one write's
 * value, of this key. Else it tries again, LB_MASTER_TRIES times in all,
 * then gives up (LB_MASTER_TORN: the caller drops the flow, counted as
 * LB_DROP_TORN_MASTER). It assumes, as the other torn-read checks here
 * do, that loads stay in order (x86), and that the kernel stores the
 * aligned 8-byte gen in one piece.
 */
#define LB_MASTER_TRIES 3

enum {
	LB_MASTER_MISSING = 0, /* no entry; *out untouched */
	LB_MASTER_FOUND   = 1,
	LB_MASTER_GONE    = 2, /* deleted while read; *out clobbered */
	LB_MASTER_TORN    = 3, /* rewritten under every try; *out clobbered */
};

/*
 * For tests only (bpf.DatapathOptions): the first this many tries of
 * every read fail as if the element had been rewritten. 0, the default,
 * lets the verifier drop the check.
 */
volatile const __u32 lb_fault_master_rechecks;

#define LB_READ_ONCE_U64(x) (*(volatile __u64 *)&(x))

/*
 * For tests only (bpf.DatapathOptions): every read takes a write for
 * overlapping it (lb_read_master), as one that rewrote the element would.
 */
volatile const __u32 lb_fault_write_overlaps;

/*
 * For tests only (bpf.DatapathOptions): a write of lb_services is done
 * between a one-lookup read's copy and its second read of the word, as
 * a writer on another CPU may do while this CPU is held up mid-read (an
 * interrupt): the second read must see it, and the read go guarded.
 */
volatile const __u32 lb_fault_write_during_read;

/*
 * Set by the loader on CPUs that may reorder loads (all but x86): the
 * reads of lb_services_seq are then fenced (lb_load_fence).
 */
volatile const __u32 lb_weak_memory_order;

/*
 * lb_load_fence keeps the loads before it before the loads after it. x86
 * does not reorder loads, so the compiler's barrier is enough there.
 * Elsewhere a fully ordered atomic does it (BPF has no fence of its own):
 * one on the stack, so that no two CPUs contend for a cache line, as they
 * would for one on lb_services_seq's word.
 */
static __always_inline void lb_load_fence(void)
{
	volatile __u64 scratch = 0;

	if (lb_weak_memory_order) {
		__u64 v = __sync_fetch_and_add(&scratch, 0);

		barrier_var(v);
	}
	lb_compiler_barrier();
}

/* lb_read_master_guarded is a read a write may overlap: see above. */
static __always_inline int lb_read_master_guarded(const struct lb_service_key *key, struct lb_service_value *out)
{
	struct lb_service_value *p, *q;
	__u64 gen;

	p = bpf_map_lookup_elem(&lb_services, key);
	if (!p) /* perhaps a lookup that raced a rewrite (below): once more */
		p = bpf_map_lookup_elem(&lb_services, key);
	if (!p)
		return LB_MASTER_MISSING;
	for (__u32 i = 0; i < LB_MASTER_TRIES; i++) {
		gen = LB_READ_ONCE_U64(p->gen);
		lb_compiler_barrier();
		q = bpf_map_lookup_elem(&lb_services, key);
		if (q == p) {
			__builtin_memcpy(out, p, offsetof(struct lb_service_value, gen));
			lb_compiler_barrier();
			q = bpf_map_lookup_elem(&lb_services, key);
			if (q == p && LB_READ_ONCE_U64(p->gen) == gen && i >= lb_fault_master_rechecks)
				return LB_MASTER_FOUND;
		}
		/* A lookup racing a rewrite may find neither element: the
		 * kernel links the new one at its bucket's head, then unlinks
		 * the old, so a lookup that passed the head before the one and
		 * reaches the old one's place after the other misses both
		 * (when another key's element comes first). Once more. */
		p = q ? q : bpf_map_lookup_elem(&lb_services, key);
		if (!p)
			return LB_MASTER_GONE;
	}
	return LB_MASTER_TORN;
}

/*
 * lb_read_master copies key's lb_services entry into *out, all but its
 * gen. A global function: the verifier checks it once, not at every
 * lookup of a frontend.
 *
 * The common read is one lookup: the writers announce every write in
 * lb_services_seq (lb.h), and a lookup and copy between two reads of its
 * word that find it equal, with no write in flight, overlapped no write.
 * The kernel changes lb_services only for its writers' syscalls (the
 * datapath never writes it, and a hash map without an LRU or timers
 * evicts nothing itself): so the copy is one write's value of this key,
 * and a miss is a miss. Any other outcome is read again, guarded, as
 * if the fast read had not been.
 */
__noinline int lb_read_master(const struct lb_service_key *key, struct lb_service_value *out)
{
	struct lb_service_value *p = NULL;
	__u32 zero = 0;
	__u64 *seq, s;
	int r;

	if (!key || !out)
		return LB_MASTER_MISSING;
	seq = bpf_map_lookup_elem(&lb_services_seq, &zero);
	if (seq) {
		s = LB_READ_ONCE_U64(*seq);
		if (!(s & LB_SEQ_IN_FLIGHT)) {
			lb_load_fence();
			p = bpf_map_lookup_elem(&lb_services, key);
			if (p)
				__builtin_memcpy(out, p, offsetof(struct lb_service_value, gen));
			if (lb_fault_write_during_read)
				__sync_fetch_and_add(seq, LB_SEQ_DONE);
			lb_load_fence();
			if (LB_READ_ONCE_U64(*seq) == s && !lb_fault_write_overlaps)
				return p ? LB_MASTER_FOUND : LB_MASTER_MISSING;
		}
	}
	r = lb_read_master_guarded(key, out);
	if (r == LB_MASTER_MISSING && p)
		return LB_MASTER_GONE; /* the fast copy clobbered *out */
	return r;
}

/* lb_master_missing says whether a read found no entry (out of date or not). */
static __always_inline bool lb_master_missing(int r)
{
	return r == LB_MASTER_MISSING || r == LB_MASTER_GONE;
}

#endif /* __LBSTATE_MASTER_H */
