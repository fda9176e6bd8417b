/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding a flow's one conntrack entry (lb.h, LB_CT_CLIENT): keyed by the
 * client's address, port and protocol, which both directions know, and
 * checked against each direction's own side, the frontend (lb_rev_nat)
 * for the client's packets and the backend (lb_backends) for replies.
 */
#ifndef __LBSTATE_CT_H
#define __LBSTATE_CT_H

/*
 * The client ports of lb_ct's flows, one element per port (host order),
 * 0 until a flow's client uses that port, then 1 for good: the datapath
 * sets them as it records flows, and the agent for the flows in lb_ct
 * when it loads the datapath and at each collection (unpinned; every
 * datapath a process loads over one lb_ct shares them). An element is
 * written whole, only ever with 1, by both: no read-modify-write to race.
 *
 * lb_dp_ct_ports: the ports of every flow's client. A packet with no
 * entry under its source whose destination port no client used is no
 * reply, and not looked up as one: a new flow pays one lookup that
 * misses in lb_ct, not two.
 *
 * lb_dp_ct_pair_ports: the ports of the clients of flows with two
 * entries. The entry under the client's key in lb_ct says that a client
 * has such flows, but the LRU may take it while they are idle; an array
 * loses nothing, so a packet whose client's port is here is looked for
 * among the flows with two entries whatever lb_ct holds under its key.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} lb_dp_ct_ports SEC(".maps"), lb_dp_ct_pair_ports SEC(".maps");

/* lb_ct_port_used says whether port (network order) is set in map. */
#define lb_ct_port_used(map, port)                                       \
	({                                                               \
		__u32 __i = bpf_ntohs(port);                             \
		__u32 *__v = bpf_map_lookup_elem(&(map), &__i);          \
		__v && *__v;                                             \
	})

/* lb_ct_port_use sets port (network order) in map, unless it is. */
#define lb_ct_port_use(map, port)                                        \
	({                                                               \
		__u32 __i = bpf_ntohs(port);                             \
		__u32 *__v = bpf_map_lookup_elem(&(map), &__i);          \
		if (__v && !*__v)                                        \
			*__v = 1;                                        \
	})

/*
 * lb_ct_client_key makes k (zeroed by the caller) the key of the one
 * entry of a flow of client addr:port (lb.h, LB_CT_CLIENT).
 */
static __always_inline void lb_ct_client_key(struct lb_ct_key *k, const __u8 addr[16], __be16 port, __u8 proto)
{
	__builtin_memcpy(k->src, addr, 16);
	k->sport = port;
	k->proto = proto;
	k->kind = LB_CT_CLIENT;
}

/*
 * lb_ct_flow_to says whether ct is the one entry of a flow to frontend
 * addr:port as the client addressed it: a client's packet to addr:port
 * is the flow's. An IPv4 flow's entry holds that address itself (lb.h);
 * an IPv6 flow's is its frontend's lb_rev_nat address, compared in the
 * map with no copy: the ID read again after the comparison says the slot
 * held the frontend throughout (select.h, torn reads).
 */
static __always_inline bool lb_ct_flow_to(const struct lb_ct_value *ct, const __u8 addr[16], __be16 port)
{
	__u32 id = ct->rev_nat_id, slot = lb_id_slot(id, lb_rev_nat_max);
	struct lb_rev_nat_value *fe;
	bool same;

	if (ct->dir != LB_CT_FLOW || !id)
		return false;
	if (ct->peer_port) /* IPv4: the 8 bytes that hold the mapped address */
		return ct->peer_port == port && *(const __u64 *)&ct->peer[8] == *(const __u64 *)&addr[8];
	fe = bpf_map_lookup_elem(&lb_rev_nat, &slot);
	if (!fe || LB_READ_ONCE_U32(fe->id) != id)
		return false;
	same = fe->port == port && lb_addr_eq(fe->addr, addr);
	lb_compiler_barrier();
	return same && LB_READ_ONCE_U32(fe->id) == id;
}

/*
 * lb_ct_flow_from says whether ct is the one entry of a flow to backend
 * addr:port: a packet from addr:port to the client is the flow's reply.
 */
static __always_inline bool lb_ct_flow_from(const struct lb_ct_value *ct, const __u8 addr[16], __be16 port)
{
	__u32 id = ct->backend_id, slot = lb_id_slot(id, lb_backends_max);
	struct lb_backend *b;
	bool same;

	if (ct->dir != LB_CT_FLOW || !id)
		return false;
	b = bpf_map_lookup_elem(&lb_backends, &slot);
	if (!b || LB_READ_ONCE_U32(b->id) != id)
		return false;
	same = b->port == port && lb_addr_eq(b->addr, addr);
	lb_compiler_barrier();
	return same && LB_READ_ONCE_U32(b->id) == id;
}

/*
 * lb_ct_sent_to makes addr, a flow's frontend address from lb_rev_nat
 * (ct its one entry or its reply entry), the address the client sent to,
 * if it is the any-address (a NodePort on every node address): which the
 * entry keeps (a reply entry's peer; a one entry, IPv4 only, its mapped
 * address's last 8 bytes).
 */
static __always_inline void lb_ct_sent_to(const struct lb_ct_value *ct, __u8 addr[16])
{
	const __u32 *w = (const __u32 *)addr;

	if (w[0] || w[1] || (w[2] && w[2] != bpf_htonl(0x0000ffff)) || w[3])
		return;
	if (ct->dir == LB_CT_REPLY)
		__builtin_memcpy(addr, ct->peer, 16);
	else
		__builtin_memcpy(&addr[8], &ct->peer[8], 8);
}

/*
 * lb_ct_one finds the live one entry of the flow of packet p: as a
 * client's packet (reply false: p's source is the client), or as a reply
 * (p's destination is). *held says whether the client's key holds any
 * entry: if none, no flow of that client has two entries either (lb.h).
 * k is room for the key, the caller's. Inlined: a subprogram's call and
 * return cost an established packet about 10 ns.
 */
static __always_inline struct lb_ct_value *lb_ct_one(const struct lb_pkt *p, bool reply, __u32 now, bool *held,
						     struct lb_ct_key *k)
{
	struct lb_ct_value *ct;

	__builtin_memset(k, 0, sizeof(*k));
	if (reply)
		lb_ct_client_key(k, p->tuple.dst, p->tuple.dport, p->tuple.proto);
	else
		lb_ct_client_key(k, p->tuple.src, p->tuple.sport, p->tuple.proto);
	ct = bpf_map_lookup_elem(&lb_ct, k);
	*held = ct != NULL;
	if (!ct || !lb_ct_live(ct, now))
		return NULL;
	if (reply ? !lb_ct_flow_from(ct, p->tuple.src, p->tuple.sport) : !lb_ct_flow_to(ct, p->tuple.dst, p->tuple.dport))
		return NULL;
	return ct;
}

/*
 * lb_ct_find_flow finds the one entry of the flow that packet t (an
 * lb_ct key) belongs to, if it has one: as a reply (*reply true), or as
 * a client's packet. k is room for a key, the caller's.
 */
static __always_inline struct lb_ct_value *lb_ct_find_flow(const struct lb_ct_key *t, struct lb_ct_key *k, __u32 now,
							   bool *reply)
{
	struct lb_ct_value *ct;

	__builtin_memset(k, 0, sizeof(*k));
	lb_ct_client_key(k, t->dst, t->dport, t->proto);
	ct = bpf_map_lookup_elem(&lb_ct, k);
	if (ct && lb_ct_live(ct, now) && lb_ct_flow_from(ct, t->src, t->sport)) {
		*reply = true;
		return ct;
	}
	lb_ct_client_key(k, t->src, t->sport, t->proto);
	ct = bpf_map_lookup_elem(&lb_ct, k);
	if (ct && lb_ct_live(ct, now) && lb_ct_flow_to(ct, t->dst, t->dport)) {
		*reply = false;
		return ct;
	}
	return NULL;
}

#endif /* __LBSTATE_CT_H */
