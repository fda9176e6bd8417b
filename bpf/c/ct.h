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
