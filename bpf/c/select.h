/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What both the tc and the socket programs do with the maps: find a
 * frontend, check source ranges and affinity, pick a backend, count.
 * Included by datapath.c after the maps (lb.c).
 */
#ifndef __LBSTATE_SELECT_H
#define __LBSTATE_SELECT_H

/*
 * The Maglev table size M, set by the loader from lb_maglev's inner maps:
 * the verifier needs a bound on the slot index, and a frozen constant is
 * one.
 */
volatile const __u32 lb_maglev_table_size;

/*
 * The max_entries of lb_backends and lb_rev_nat, set by the loader from
 * the agent's maps: a dense ID's slot depends on them (lb_id_slot). Left
 * 0, every lookup misses.
 */
volatile const __u32 lb_backends_max;
volatile const __u32 lb_rev_nat_max;

/*
 * The flow hash's basis, set by the loader from the node's seed
 * (lb_flow_seed, lb.h): the map is read once at load, not per flow.
 */
volatile const __u32 lb_flow_hash_basis = LB_FNV1A_OFFSET;

/*
 * Torn reads. lb_backends and lb_rev_nat are arrays that the agent writes
 * in place (slotted.go): a program copying a value while its slot is
 * rewritten could get half of each. The agent never changes the fields
 * and the ID of a slot that held an ID in one write: such a slot changes
 * owner as {old fields, ID 0}, {new fields, ID 0}, {new fields, new ID},
 * three writes in that order (and an ID's own updates change only fields
 * it does not tie to its identity). So a copy whose ID is id before and
 * after it holds id's fields alone. A slot of lb_backends that never
 * held an ID is filled in one write: no program looks a backend ID up
 * before its entry is written (lb_services names it after). Not so in
 * lb_rev_nat, whose ID a master entry names first. The re-read after the copy relies on the CPU keeping
 * loads in order, as x86 does; the compiler is kept from reordering by
 * the barrier.
 */
#define LB_READ_ONCE_U32(x) (*(volatile __u32 *)&(x))
#define lb_compiler_barrier() asm volatile("" ::: "memory")

/* lb_backend_lookup copies backend id into *to; false if its slot holds another. */
static __always_inline bool lb_backend_lookup(__u32 id, struct lb_backend *to)
{
	__u32 slot = lb_id_slot(id, lb_backends_max);
	struct lb_backend *b;

	if (!id)
		return false;
	b = bpf_map_lookup_elem(&lb_backends, &slot);
	if (!b || LB_READ_ONCE_U32(b->id) != id)
		return false;
	__builtin_memcpy(to, b, sizeof(*to));
	lb_compiler_barrier();
	return LB_READ_ONCE_U32(b->id) == id;
}

/* lb_rev_nat_lookup copies frontend id into *to; false if its slot holds another. */
static __always_inline bool lb_rev_nat_lookup(__u32 id, struct lb_rev_nat_value *to)
{
	__u32 slot = lb_id_slot(id, lb_rev_nat_max);
	struct lb_rev_nat_value *fe;

	if (!id)
		return false;
	fe = bpf_map_lookup_elem(&lb_rev_nat, &slot);
	if (!fe || LB_READ_ONCE_U32(fe->id) != id)
		return false;
	__builtin_memcpy(to, fe, sizeof(*to));
	lb_compiler_barrier();
	return LB_READ_ONCE_U32(fe->id) == id;
}

/*
 * lb_now is the datapath clock in seconds: CLOCK_MONOTONIC, read coarsely
 * (a tick's precision is plenty for timeouts in seconds, and it is read
 * without the clock source).
 */
static __always_inline __u32 lb_now(void)
{
	return bpf_ktime_get_coarse_ns() / 1000000000ULL;
}

static __always_inline bool lb_addr_is_v4(const __u8 a[16])
{
	const __u32 *w = (const __u32 *)a;

	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

static __always_inline void lb_count_drop(__u32 rev_nat_id, __u32 reason)
{
	struct lb_drop_key k = { .rev_nat_id = rev_nat_id, .reason = reason };
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(&lb_drops, &k);
	if (v) {
		*v += 1; /* per CPU: no other writer */
		return;
	}
	if (bpf_map_update_elem(&lb_drops, &k, &one, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(&lb_drops, &k); /* another CPU created it first */
	if (v)
		*v += 1;
}

static __always_inline void lb_count(__u32 rev_nat_id, __u32 backend_id, __u64 flows, __u64 packets, __u64 bytes)
{
	struct lb_counter_key k = { .rev_nat_id = rev_nat_id, .backend_id = backend_id };
	struct lb_counter_value init = { .flows = flows, .packets = packets, .bytes = bytes };
	struct lb_counter_value *v;

	v = bpf_map_lookup_elem(&lb_counters, &k);
	if (!v) {
		if (bpf_map_update_elem(&lb_counters, &k, &init, BPF_NOEXIST) == 0)
			return;
		v = bpf_map_lookup_elem(&lb_counters, &k);
		if (!v)
			return; /* the map is full: the count is lost */
	}
	v->flows += flows;
	v->packets += packets;
	v->bytes += bytes;
}

#include "master.h"

/* lb_lookup_master copies key's master entry, or an any-protocol one. */
static __always_inline int lb_lookup_master(struct lb_service_key *key, struct lb_service_value *m)
{
	__u8 proto = key->proto;
	int r;

	r = lb_read_master(key, m);
	if (!lb_master_missing(r) || proto == 0)
		return r;
	key->proto = 0;
	r = lb_read_master(key, m);
	if (lb_master_missing(r))
		key->proto = proto;
	return r;
}

static __always_inline bool lb_type_is_external(__u8 type)
{
	return type == LB_SVC_NODE_PORT || type == LB_SVC_LOAD_BALANCER ||
	       type == LB_SVC_EXTERNAL_IP || type == LB_SVC_HOST_PORT;
}

/*
 * lb_lookup_frontend copies into *m the master entry for key's address,
 * port and protocol, leaving key as the entry's key: LB_MASTER_FOUND,
 * LB_MASTER_TORN, or a miss. A client inside the node (internal) takes
 * an external frontend's internal twin when the service has one (its
 * traffic policies differ); the twin is looked for only then, so that
 * ClusterIP traffic costs one read.
 */
static __always_inline int lb_lookup_frontend(struct lb_service_key *key, bool internal, struct lb_service_value *m)
{
	int r;

	key->slot = 0;
	key->scope = LB_SCOPE_EXTERNAL;
	r = lb_lookup_master(key, m);
	if (r != LB_MASTER_FOUND || !internal || !lb_type_is_external(m->type))
		return r;
	key->scope = LB_SCOPE_INTERNAL;
	r = lb_read_master(key, m);
	if (!lb_master_missing(r))
		return r;
	key->scope = LB_SCOPE_EXTERNAL;
	if (r == LB_MASTER_MISSING)
		return LB_MASTER_FOUND; /* *m is still the external master */
	return lb_read_master(key, m); /* the twin went while read, over *m */
}

/* lb_source_allowed says whether lb_src_range admits client. */
static __always_inline bool lb_source_allowed(const struct lb_service_value *m, const __u8 client[16])
{
	struct lb_src_range_key k = { .prefixlen = 32 + 128, .rev_nat_id = m->rev_nat_id };

	if (!(m->flags & LB_F_SOURCE_RANGES))
		return true;
	__builtin_memcpy(k.addr, client, 16);
	return bpf_map_lookup_elem(&lb_src_range, &k) != NULL;
}

/*
 * lb_slot_backend returns the backend ID of slot (1..) of the frontend
 * whose master entry is m and key names: from m's inline array for the
 * first LB_INLINE_SLOTS slots, else from the slot's own entry; 0 if it
 * has none. The inline IDs come from the same value as m's count, so
 * they agree with it.
 */
static __always_inline __u32 lb_slot_backend(const struct lb_service_key *key, const struct lb_service_value *m,
					     __u32 slot)
{
	struct lb_service_key k;
	struct lb_service_value *v;
	__u32 idx = slot - 1;
	__u64 pair;

	if (slot == 0)
		return 0;
	if (slot <= LB_INLINE_SLOTS) {
		/* The verifier wants the index bounded where it is used;
		 * clang would drop a mask it knows to be a no-op. */
		barrier_var(idx);
		return m->backends[idx & (LB_INLINE_SLOTS - 1)];
	}
	k = *key;
	k.slot = slot;
	/*
	 * backend_id and rev_nat_id in one load. A lookup that raced a
	 * rewrite of the entry may find nothing, and the element it found
	 * may already hold another key's entry: one of another frontend,
	 * or a master (backend_id 0), since a freed element goes to the next
	 * insert at once (lb_read_master). Either way the slot's entry is
	 * another element now: look again, LB_MASTER_TRIES times in all.
	 */
	for (__u32 i = 0; i < LB_MASTER_TRIES; i++) {
		v = bpf_map_lookup_elem(&lb_services, &k);
		if (!v)
			continue;
		pair = LB_READ_ONCE_U64(*(__u64 *)v);
		if ((__u32)(pair >> 32) == m->rev_nat_id && (__u32)pair != 0)
			return (__u32)pair;
	}
	return 0;
}

/* lb_slot_scan is the state of a search of a frontend's slots. */
struct lb_slot_scan {
	const struct lb_service_key *key;
	const struct lb_service_value *m;
	__u32 id;
	__u16 found;
};

static long lb_slot_scan_step(__u32 i, void *ctx)
{
	struct lb_slot_scan *s = ctx;

	if (lb_slot_backend(s->key, s->m, i + 1) == s->id) {
		s->found = i + 1;
		return 1;
	}
	return 0;
}

/*
 * lb_slot_of returns a slot among 1..count of the frontend whose master
 * entry key names that holds backend id, trying hint first; 0 if none
 * does. The search is a bpf_loop: the verifier sees its step once, however
 * many slots a frontend has.
 */
static __always_inline __u16 lb_slot_of(const struct lb_service_key *key, const struct lb_service_value *m, __u32 id,
					__u16 hint)
{
	struct lb_slot_scan s = { .key = key, .m = m, .id = id };

	if (hint && hint <= m->count && lb_slot_backend(key, m, hint) == id)
		return hint;
	bpf_loop(m->count, lb_slot_scan_step, &s, 0);
	return s.found;
}

/*
 * lb_affinity_backend returns the backend client is pinned to, if the pin
 * is younger than the frontend's timeout and the backend still takes new
 * flows for it (active, in one of the slots 1..count), refreshing it;
 * else 0, and the caller replaces the pin.
 */
static __always_inline __u32 lb_affinity_backend(const struct lb_service_key *key, const struct lb_service_value *m,
						 const __u8 client[16], __u32 now)
{
	struct lb_affinity_key k = { .rev_nat_id = m->rev_nat_id };
	struct lb_affinity_value *v;
	struct lb_backend b;
	__u32 id;
	__u16 slot;

	__builtin_memcpy(k.client, client, 16);
	v = bpf_map_lookup_elem(&lb_affinity, &k);
	if (!v || now - v->last_used > m->affinity_timeout)
		return 0;
	id = v->backend_id;
	if (!lb_backend_lookup(id, &b) || b.state != LB_BACKEND_ACTIVE)
		return 0;
	slot = lb_slot_of(key, m, id, v->slot);
	if (!slot)
		return 0;
	if (v->slot != slot)
		v->slot = slot;
	if (v->last_used != now)
		v->last_used = now;
	return id;
}

static __always_inline void lb_affinity_pin(const struct lb_service_value *m, const __u8 client[16], __u32 backend_id,
					    __u16 slot, __u32 now)
{
	struct lb_affinity_key k = { .rev_nat_id = m->rev_nat_id };
	struct lb_affinity_value v = { .backend_id = backend_id, .last_used = now, .slot = slot };

	__builtin_memcpy(k.client, client, 16);
	bpf_map_update_elem(&lb_affinity, &k, &v, BPF_ANY);
}

/*
 * lb_pick_backend picks the slot of a new flow to the frontend whose
 * master entry key names: with Maglev (and a flow hash), the table's slot
 * hash % M; otherwise a random slot of 1..count, so that each backend gets
 * new flows in proportion to its slots. It returns the slot's backend ID,
 * or 0, with *reason set, when there is none; *chosen is the lb_services
 * slot it took (0 for a Maglev table's).
 */
static __always_inline __u32 lb_pick_backend(const struct lb_service_key *key, const struct lb_service_value *m,
					     const __u32 *hash, __u32 *reason, __u16 *chosen)
{
	__u32 id = m->rev_nat_id, zero = 0, size = lb_maglev_table_size, idx, slot;
	__u32 *table;
	void *inner;

	*reason = LB_DROP_MISSING_ENTRY;
	*chosen = 0;
	if (m->count == 0) {
		*reason = LB_DROP_NO_BACKEND;
		return 0;
	}
	if (m->algorithm == LB_ALG_MAGLEV && hash) {
		inner = bpf_map_lookup_elem(&lb_maglev, &id);
		if (!inner || size == 0)
			return 0;
		table = bpf_map_lookup_elem(inner, &zero);
		if (!table)
			return 0;
		idx = *hash % size;
		/* The verifier does not bound a remainder; clang would drop a
		 * check it knows is true, unless it forgets what idx is. */
		barrier_var(idx);
		if (idx >= size)
			return 0;
		return table[idx];
	}
	slot = bpf_get_prandom_u32() % m->count + 1;
	*chosen = slot;
	return lb_slot_backend(key, m, slot);
}

/*
 * lb_select_backend is lb_pick_backend, except that a flow landing on a
 * reject slot (LB_BACKEND_REJECT) gets 0, with *reason LB_DROP_REJECTED.
 */
static __always_inline __u32 lb_select_backend(const struct lb_service_key *key, const struct lb_service_value *m,
					       const __u32 *hash, __u32 *reason, __u16 *chosen)
{
	__u32 id = lb_pick_backend(key, m, hash, reason, chosen);

	if (id == LB_BACKEND_REJECT) {
		*reason = LB_DROP_REJECTED;
		return 0;
	}
	return id;
}

/*
 * The overrides (lb.h, lb_services). LB_SKIP_MAX_SLOTS bounds the slots
 * lb_client_is_backend reads: a redirect to node-local pods has few.
 */
#define LB_SKIP_MAX_SLOTS 64

static __always_inline bool lb_addr_eq(const __u8 a[16], const __u8 b[16])
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1];
}

/*
 * lb_client_is_backend says whether client is the address of one of the
 * backends in slots 1..count+standby (the first LB_SKIP_MAX_SLOTS) of the
 * frontend whose master entry key names.
 */
static __always_inline bool lb_client_is_backend(const struct lb_service_key *key, const struct lb_service_value *m,
						 const __u8 client[16])
{
	struct lb_backend b;
	__u32 n = (__u32)m->count + m->standby, id;

	for (__u32 i = 1; i <= LB_SKIP_MAX_SLOTS; i++) {
		if (i > n)
			break;
		id = lb_slot_backend(key, m, i);
		if (lb_backend_lookup(id, &b) && lb_addr_eq(b.addr, client))
			return true;
	}
	return false;
}

/*
 * lb_select_fallback picks a random fallback slot (after the standby
 * ones): the service's own backends, for a client that is one of the
 * redirect's backends. 0, with *reason set, when there is none.
 */
static __always_inline __u32 lb_select_fallback(const struct lb_service_key *key, const struct lb_service_value *m,
						__u32 *reason)
{
	*reason = LB_DROP_NO_BACKEND;
	if (m->fallback == 0)
		return 0;
	*reason = LB_DROP_MISSING_ENTRY;
	return lb_slot_backend(key, m, (__u32)m->count + m->standby + 1 + bpf_get_prandom_u32() % m->fallback);
}

/*
 * lb_proxy_backend fills b with the L7 proxy's address of a frontend with
 * LB_F_PROXY: the loopback address of the flow's family, at proxy_port.
 * Its backend ID is 0.
 */
static __always_inline void lb_proxy_backend(const struct lb_service_value *m, bool v4, struct lb_backend *b)
{
	__builtin_memset(b, 0, sizeof(*b));
	if (v4) {
		b->addr[10] = b->addr[11] = 0xff;
		b->addr[12] = 127;
		b->addr[15] = 1;
	} else {
		b->addr[15] = 1;
	}
	b->port = m->proxy_port;
}

/*
 * The conntrack timeouts in seconds (lb.h, lb_ct), set by the loader from
 * the agent's flags.
 */
volatile const __u32 lb_ct_timeout_syn = LB_CT_TIMEOUT_SYN;
volatile const __u32 lb_ct_timeout_tcp = LB_CT_TIMEOUT_TCP;
volatile const __u32 lb_ct_timeout_close = LB_CT_TIMEOUT_CLOSE;
volatile const __u32 lb_ct_timeout_other = LB_CT_TIMEOUT_OTHER;

/* lb_ct_live says whether a conntrack entry has not expired by now. */
static __always_inline bool lb_ct_live(const struct lb_ct_value *ct, __u32 now)
{
	return (__s32)(ct->expires - now) >= 0;
}

/* lb_ct_timeout is the timeout of a flow of proto in state flags. */
static __always_inline __u32 lb_ct_timeout(__u8 proto, __u8 flags)
{
	if (proto != IPPROTO_TCP)
		return lb_ct_timeout_other;
	if (flags & LB_CT_F_CLOSING)
		return lb_ct_timeout_close;
	if (!(flags & LB_CT_F_REPLIED))
		return lb_ct_timeout_syn;
	return lb_ct_timeout_tcp;
}

#endif /* __LBSTATE_SELECT_H */
