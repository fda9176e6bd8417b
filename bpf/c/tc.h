/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tc programs: load balancing of packets arriving on an interface
 * (DNAT to the backend, with conntrack so that a flow keeps its backend)
 * and reverse NAT of the replies. Ethernet devices, IPv4 and IPv6, TCP
 * and UDP, fragments too (parse.h), and ICMP errors about balanced flows
 * (icmp.h); anything else passes untouched.
 */
#ifndef __LBSTATE_TC_H
#define __LBSTATE_TC_H

#include "parse.h"

#include "rewrite.h"
#include "ct.h"
#include "icmp.h"

/*
 * lb_to_node says whether the packet is addressed to this node, for
 * frontends on every node address: the route to its destination is
 * local; or there is none, or the node does not forward on this
 * interface, so that the packet can only be for it.
 */
static __always_inline bool lb_to_node(struct __sk_buff *skb, const struct lb_pkt *p)
{
	struct bpf_fib_lookup fib = { .ifindex = skb->ifindex };
	long rc;

	if (p->v4) {
		fib.family = AF_INET;
		__builtin_memcpy(&fib.ipv4_src, &p->tuple.src[12], 4);
		__builtin_memcpy(&fib.ipv4_dst, &p->tuple.dst[12], 4);
	} else {
		fib.family = AF_INET6;
		__builtin_memcpy(fib.ipv6_src, p->tuple.src, 16);
		__builtin_memcpy(fib.ipv6_dst, p->tuple.dst, 16);
	}
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	return rc == BPF_FIB_LKUP_RET_NOT_FWDED || rc == BPF_FIB_LKUP_RET_FWD_DISABLED;
}

/*
 * lb_dp_master (the datapath's own, per CPU) holds the tc programs' copy
 * of a master (lb_read_master): on their stack it would take the combined
 * stack over the verifier's 512 bytes. A tc program runs to its end
 * before another runs on its CPU (softirq, or bottom halves disabled), so
 * one copy per CPU serves; the socket programs, which a task switch may
 * interrupt, copy to their stack.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lb_service_value);
} lb_dp_master SEC(".maps");

/*
 * lb_tc_frontend copies into *m the frontend of a packet: its
 * destination's, or, for a packet to this node, a NodePort frontend on
 * the any-address (lb_lookup_frontend's answers).
 */
static __always_inline int lb_tc_frontend(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_service_key *key,
					  bool internal, struct lb_service_value *m)
{
	int r;

	__builtin_memcpy(key->addr, p->tuple.dst, 16);
	key->port = p->tuple.dport;
	key->proto = p->tuple.proto;
	r = lb_lookup_frontend(key, internal, m);
	if (!lb_master_missing(r))
		return r;
	__builtin_memset(key->addr, 0, 16);
	if (p->v4)
		key->addr[10] = key->addr[11] = 0xff;
	key->proto = p->tuple.proto;
	r = lb_lookup_frontend(key, internal, m);
	if (r == LB_MASTER_FOUND && !(m->type == LB_SVC_NODE_PORT && lb_to_node(skb, p)))
		return LB_MASTER_MISSING;
	if (r == LB_MASTER_TORN && !lb_to_node(skb, p))
		return LB_MASTER_MISSING; /* not for a NodePort of ours, whatever the master said */
	return r;
}

/* lb_ct_reply_key is the key of the reply entry of flow p to backend addr:port. */
static __always_inline void lb_ct_reply_key(struct lb_ct_key *k, const struct lb_pkt *p, const __u8 addr[16], __be16 port)
{
	__builtin_memcpy(k->src, addr, 16);
	__builtin_memcpy(k->dst, p->tuple.src, 16);
	k->sport = port;
	k->dport = p->tuple.sport;
	k->proto = p->tuple.proto;
	k->kind = LB_CT_PACKET;
}

/*
 * lb_tcp_flags reads the TCP flags of packet p (0 for UDP). It is read
 * in the conntrack subprograms below, and in the main program only for
 * lb_ct_quiet's mask test: read in lb_parse and kept, its value kept TCP
 * and UDP packets from sharing verifier states, which doubled the
 * instructions verified.
 */
static __always_inline __u8 lb_tcp_flags(struct __sk_buff *skb, const struct lb_pkt *p)
{
	void *data, *end;
	__u32 off = p->l4_off;
	__u8 *flags;
	__u8 byte;

	/* Else clang may keep &skb->data (the context plus an offset) on
	 * the stack and read through it, which the verifier refuses. */
	barrier_var(skb);
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;

	if (p->tuple.proto != IPPROTO_TCP || p->later_frag || off > LB_L4_OFF_MAX)
		return 0;
	flags = data + off + 13;
	if ((void *)(flags + 1) > end)
		return bpf_skb_load_bytes(skb, off + 13, &byte, 1) ? 0 : byte;
	return *flags;
}

/*
 * lb_tcp_seq reads the sequence number of TCP packet p (network order; 0
 * if it cannot be read).
 */
static __always_inline __be32 lb_tcp_seq(struct __sk_buff *skb, const struct lb_pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 off = p->l4_off;
	__be32 *seq, val;

	if (p->tuple.proto != IPPROTO_TCP || p->later_frag || off > LB_L4_OFF_MAX)
		return 0;
	seq = data + off + 4;
	if ((void *)(seq + 1) > end) /* not in the linear part: by the helper */
		return bpf_skb_load_bytes(skb, off + 4, &val, sizeof(val)) ? 0 : val;
	return *seq;
}

/*
 * lb_ct_next_flags is a flow's state after its packet p: a reply answers
 * the handshake (a RST as the first reply refuses it); a FIN or RST
 * closes (a FIN its sender's side, a RST both); a SYN alone from the
 * client starts the tuple's connection afresh.
 */
static __always_inline __u8 lb_ct_next_flags(struct __sk_buff *skb, __u8 flags, const struct lb_pkt *p, bool reply)
{
	__u8 tcp = lb_tcp_flags(skb, p);

	if (p->tuple.proto != IPPROTO_TCP)
		return flags;
	if (reply && (tcp & LB_TCP_RST) && !(flags & LB_CT_F_REPLIED))
		return flags | LB_CT_F_CLOSING | LB_CT_F_REPLIED | LB_CT_F_REFUSED | LB_CT_F_CLIENT_CLOSED |
		       LB_CT_F_BACKEND_CLOSED;
	if (tcp & LB_TCP_RST)
		return flags | LB_CT_F_CLOSING | (reply ? LB_CT_F_REPLIED : 0) | LB_CT_F_CLIENT_CLOSED |
		       LB_CT_F_BACKEND_CLOSED;
	if (tcp & LB_TCP_FIN)
		return flags | LB_CT_F_CLOSING | (reply ? LB_CT_F_REPLIED | LB_CT_F_BACKEND_CLOSED : LB_CT_F_CLIENT_CLOSED);
	if (reply)
		return flags | LB_CT_F_REPLIED;
	if ((tcp & (LB_TCP_SYN | LB_TCP_ACK)) == LB_TCP_SYN)
		return 0;
	return flags;
}

/*
 * lb_ct_sync gives the other entry of a flow, at k, the flow's state and
 * expiry (other is that entry's whole value), recreating it if the LRU
 * took it or it expired; a live entry of another flow stays.
 */
static __always_inline void lb_ct_sync(const struct lb_ct_key *k, const struct lb_ct_value *other, __u32 now)
{
	struct lb_ct_value *v = bpf_map_lookup_elem(&lb_ct, k);

	if (v && v->dir == other->dir && v->rev_nat_id == other->rev_nat_id && v->backend_id == other->backend_id) {
		v->flags = other->flags;
		v->expires = other->expires;
		return;
	}
	if (!v || !lb_ct_live(v, now))
		bpf_map_update_elem(&lb_ct, k, other, BPF_ANY);
}

/*
 * lb_tcp_syn_alone says whether the TCP header at off is a SYN without
 * ACK. A global function, verified once on its own: lb_tcp_flags
 * inlined there multiplied lb_ct_claim's states (lb_tc_workload
 * verified 15,000 instructions more, over its budget).
 */
__noinline int lb_tcp_syn_alone(struct __sk_buff *skb, __u32 off)
{
	void *data, *end;
	__u8 byte;

	barrier_var(skb);
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (off > LB_L4_OFF_MAX)
		return 0;
	if (data + off + 14 > end) {
		if (bpf_skb_load_bytes(skb, off + 13, &byte, 1))
			return 0;
	} else {
		byte = *(__u8 *)(data + off + 13);
	}
	return (byte & (LB_TCP_SYN | LB_TCP_ACK)) == LB_TCP_SYN;
}

/*
 * lb_ct_yields says whether old, a live entry of another flow of the
 * client's port that holds b's replies to it, gives them up to the
 * client's new packet p: p is a SYN alone, a new connection, and old's
 * flow is closed both ways (each side's FIN, or a RST: one closed one
 * way still carries the other side's data, and the client's port may
 * serve another destination meanwhile). The client reuses a port towards another destination
 * as soon as its connection from it closed (TIME_WAIT holds it only
 * towards the same one), and the backend, which sees one address pair
 * for both, accepts the new SYN once its side closed too, or answers it
 * for the old connection, whose end the client then resets: whichever,
 * the backend decides, not a drop that lasts the close timeout.
 */
static __always_inline bool lb_ct_yields(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_ct_value *old)
{
	const __u8 closed = LB_CT_F_CLIENT_CLOSED | LB_CT_F_BACKEND_CLOSED;

	return (old->flags & closed) == closed && p->tuple.proto == IPPROTO_TCP && !p->later_frag &&
	       lb_tcp_syn_alone(skb, p->l4_off);
}

/*
 * lb_ct_claim records new flow p to backend b (v: its state, expiry,
 * frontend and backend) in its one entry if it can, else in its reply
 * entry (the caller then writes its forward entry: v->dir is
 * LB_CT_REPLY). 0 when written; 1 when another CPU recorded the flow
 * since the caller found no entry (v->backend_id is then that entry's
 * backend, which p follows); -1 when another live flow of the
 * client's port holds b's replies to it (a reply entry of b and the
 * client, or a flow's one entry naming b): the backend could not tell
 * the two flows' replies apart. A flow closed both ways yields them to a new
 * connection (lb_ct_yields): the new flow's entry replaces its one
 * entry or its reply entry.
 *
 * The one entry's insert finds out whether the client's key is free
 * (BPF_NOEXIST): a lookup before it would walk the key's hash bucket
 * once more, a cache miss in a large map, on every new flow. Free, and
 * the client's port in no flow with two entries (p->client_held, which
 * the caller found out), it also says that no flow of the client has two
 * entries (they keep the client's key held, lb.h), so no reply of
 * another flow can collide.
 */
static __noinline int lb_ct_claim(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_backend *b,
				  struct lb_ct_value *v, __u32 now)
{
	struct lb_ct_key k = {};
	struct lb_ct_value *old;
	bool own_reply = false, one;

	v->dir = LB_CT_FLOW;
	__builtin_memset(v->peer, 0, sizeof(v->peer));
	*(__be32 *)v->peer = lb_tcp_seq(skb, p);
	v->peer_port = 0;
	if (p->v4) { /* the address the client sent to, in the mapped address's last 8 bytes */
		__builtin_memcpy(&v->peer[8], &p->tuple.dst[8], 8);
		v->peer_port = p->tuple.dport;
	}
	/* Not the proxy; for IPv6, its frontend is matched by the address
	 * the client sent to, which a NodePort on the any-address is not. */
	one = v->backend_id && lb_ct_flow_to(v, p->tuple.dst, p->tuple.dport);
	lb_ct_client_key(&k, p->tuple.src, p->tuple.sport, p->tuple.proto);
	/* Before the flow's first packet leaves, so before any reply. */
	lb_ct_port_use(lb_dp_ct_ports, p->tuple.sport);
	if (one && !p->client_held && !bpf_map_update_elem(&lb_ct, &k, v, BPF_NOEXIST))
		return 0;

	__builtin_memset(&k, 0, sizeof(k));
	lb_ct_reply_key(&k, p, b->addr, b->port);
	old = bpf_map_lookup_elem(&lb_ct, &k);
	if (old && lb_ct_live(old, now) && old->dir == LB_CT_REPLY) {
		if (old->rev_nat_id != v->rev_nat_id || old->peer_port != p->tuple.dport ||
		    !lb_addr_eq(old->peer, p->tuple.dst)) {
			if (!lb_ct_yields(skb, p, old))
				return -1;
		} else {
			own_reply = true; /* this flow's, from when it had two entries */
		}
	}
	__builtin_memset(&k, 0, sizeof(k));
	lb_ct_client_key(&k, p->tuple.src, p->tuple.sport, p->tuple.proto);
	old = bpf_map_lookup_elem(&lb_ct, &k);
	/* Another flow is one to another frontend, or to the same one
	 * through another address (a NodePort on the any-address reached
	 * at two node addresses): the frontend's ID alone cannot tell. */
	if (old && lb_ct_live(old, now) && !lb_ct_flow_to(old, p->tuple.dst, p->tuple.dport)) {
		if (old->backend_id != v->backend_id)
			one = false; /* another live flow holds the client's key */
		else if (lb_ct_yields(skb, p, old))
			old = NULL; /* as if free: this flow's entry, or a marker, replaces it */
		else
			return -1;
	}
	if (one) {
		/* The key was free when the caller looked: a live entry there
		 * now (this flow's, as it passed the check above) is another
		 * CPU's, which balanced a packet of the flow meanwhile (two
		 * threads sharing a socket): its backend, not a second choice
		 * over it. */
		if (!p->client_held && old && lb_ct_live(old, now) && old->backend_id) {
			v->backend_id = old->backend_id;
			return 1;
		}
		bpf_map_update_elem(&lb_ct, &k, v, BPF_ANY); /* this flow's own, anew, or dead */
		if (own_reply) {
			__builtin_memset(&k, 0, sizeof(k));
			lb_ct_reply_key(&k, p, b->addr, b->port);
			bpf_map_delete_elem(&lb_ct, &k);
		}
		return 0;
	}
	/* Two entries, with the client's key held: by another flow's entry,
	 * or by a marker (a dead entry that matches nothing), which also
	 * replaces this flow's own entry of before. A dead entry there is
	 * written anew, as a marker of this second, unless it is one: the
	 * collector, whose walk may have found it expired just before this
	 * flow began, deletes only an entry unchanged since (conntrack.go). */
	if (!old || (lb_ct_live(old, now) ? lb_ct_flow_to(old, p->tuple.dst, p->tuple.dport)
					  : old->rev_nat_id || old->expires != now - 1)) {
		struct lb_ct_value marker = { .dir = LB_CT_FLOW, .expires = now - 1 };

		bpf_map_update_elem(&lb_ct, &k, &marker, BPF_ANY);
	}
	lb_ct_port_use(lb_dp_ct_pair_ports, p->tuple.sport); /* which the LRU cannot take */
	v->dir = LB_CT_REPLY;
	__builtin_memcpy(v->peer, p->tuple.dst, 16);
	v->peer_port = p->tuple.dport;
	__builtin_memset(&k, 0, sizeof(k));
	lb_ct_reply_key(&k, p, b->addr, b->port);
	bpf_map_update_elem(&lb_ct, &k, v, BPF_ANY); /* free, dead, or this flow's own */
	return 0;
}

/*
 * lb_ct_create_forward records the forward entry of new flow p, whose
 * reply entry is v: the client's packets go to the backend. A TCP one
 * keeps the first packet's sequence number (see lb_ct_anew).
 */
static __noinline void lb_ct_create_forward(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_ct_value *v)
{
	struct lb_ct_value fwd = *v;

	fwd.dir = LB_CT_FORWARD;
	fwd.peer_port = 0;
	__builtin_memset(fwd.peer, 0, sizeof(fwd.peer));
	*(__be32 *)fwd.peer = lb_tcp_seq(skb, p);
	bpf_map_update_elem(&lb_ct, &p->tuple, &fwd, BPF_ANY);
}

/*
 * lb_tc_new_flow balances the first packet of a flow to a frontend (or a
 * packet of a flow to the L7 proxy, again: proxied says so, and it does
 * not count as a new flow, nor does one whose flow another CPU balanced
 * first).
 */
static __always_inline int lb_tc_new_flow(struct __sk_buff *skb, struct lb_pkt *p, bool internal, __u32 now, bool proxied)
{
	struct lb_service_key key = {};
	struct lb_service_value *m; /* a copy (lb_read_master) */
	struct lb_backend *b = NULL, be; /* be: the proxy, or a copy of the backend */
	struct lb_ct_value ct = {};
	__u32 rev_nat_id, backend_id = 0, reason, hash, zero = 0;
	__u16 slot;
	bool selected = false;
	int r;

	m = bpf_map_lookup_elem(&lb_dp_master, &zero);
	if (!m)
		return TC_ACT_OK;
	r = lb_tc_frontend(skb, p, &key, internal, m);
	if (r == LB_MASTER_TORN) {
		lb_count_drop(0, LB_DROP_TORN_MASTER);
		return TC_ACT_SHOT;
	}
	if (r != LB_MASTER_FOUND)
		return TC_ACT_OK;
	rev_nat_id = m->rev_nat_id;
	if (!lb_source_allowed(m, p->tuple.src)) {
		lb_count_drop(rev_nat_id, LB_DROP_SOURCE_RANGE);
		return TC_ACT_SHOT;
	}
	if (m->flags & LB_F_PROXY) {
		lb_proxy_backend(m, p->v4, &be);
		b = &be;
	} else if ((m->flags & LB_F_SKIP_FROM_BACKEND) && lb_client_is_backend(&key, m, p->tuple.src)) {
		backend_id = lb_select_fallback(&key, m, &reason);
		if (!backend_id) {
			lb_count_drop(rev_nat_id, reason);
			return TC_ACT_SHOT;
		}
		b = lb_backend_lookup(backend_id, &be) ? &be : NULL;
		if (!b) {
			lb_count_drop(rev_nat_id, LB_DROP_MISSING_ENTRY);
			return TC_ACT_SHOT;
		}
	}
	if (!b && (m->flags & LB_F_AFFINITY))
		backend_id = lb_affinity_backend(&key, m, p->tuple.src, now);
	if (!b && backend_id)
		b = lb_backend_lookup(backend_id, &be) ? &be : NULL;
	if (!b) {
		hash = lb_flow_hash(lb_flow_hash_basis, p->tuple.src, p->tuple.sport, key.addr, key.port, key.proto);
		backend_id = lb_select_backend(&key, m, &hash, &reason, &slot);
		if (!backend_id) {
			lb_count_drop(rev_nat_id, reason);
			return TC_ACT_SHOT;
		}
		b = lb_backend_lookup(backend_id, &be) ? &be : NULL;
		if (!b) {
			lb_count_drop(rev_nat_id, LB_DROP_MISSING_ENTRY);
			return TC_ACT_SHOT;
		}
		selected = true;
	}
	if (lb_addr_is_v4(b->addr) != p->v4) {
		lb_count_drop(rev_nat_id, LB_DROP_UNSUPPORTED);
		return TC_ACT_SHOT;
	}
	/* Both directions of the flow get one state and expiry (one entry,
	 * or two alike). */
	ct.backend_id = backend_id;
	ct.rev_nat_id = rev_nat_id;
	ct.flags = lb_ct_next_flags(skb, 0, p, false);
	ct.expires = now + lb_ct_timeout(p->tuple.proto, ct.flags);
	r = lb_ct_claim(skb, p, b, &ct, now);
	if (r > 0) { /* another CPU's packet of this flow balanced it first */
		backend_id = ct.backend_id;
		b = lb_backend_lookup(backend_id, &be) ? &be : NULL;
		if (!b) {
			lb_count_drop(rev_nat_id, LB_DROP_MISSING_ENTRY);
			return TC_ACT_SHOT;
		}
		selected = false; /* and pinned by the other CPU */
		proxied = true;   /* not a new flow: the other CPU counted it */
	} else if (r) {
		/* The backend could not tell this flow's replies from a live
		 * flow's: a flow the selection placed tries one random slot
		 * more (which keeps the weights); else, or if that collides
		 * too, it is dropped. */
		if (selected)
			backend_id = lb_select_backend(&key, m, NULL, &reason, &slot);
		b = selected && lb_backend_lookup(backend_id, &be) ? &be : NULL;
		ct.backend_id = backend_id;
		if (!b || lb_addr_is_v4(b->addr) != p->v4 || lb_ct_claim(skb, p, b, &ct, now)) {
			lb_count_drop(rev_nat_id, LB_DROP_CT_COLLISION);
			return TC_ACT_SHOT;
		}
	}
	if (selected && (m->flags & LB_F_AFFINITY))
		lb_affinity_pin(m, p->tuple.src, backend_id, slot, now);
	if (ct.dir == LB_CT_REPLY)
		lb_ct_create_forward(skb, p, &ct);
	if (lb_rewrite(skb, p, true, b->addr, b->port)) {
		lb_count_drop(rev_nat_id, LB_DROP_REWRITE);
		return TC_ACT_SHOT;
	}
	lb_count(rev_nat_id, backend_id, proxied ? 0 : 1, 1, skb->len);
	return TC_ACT_OK;
}

/*
 * lb_ct_quiet says whether packet p of a flow (ct its entry; reply: p is
 * the backend's) leaves the flow as it is: no SYN, FIN or RST (UDP has none),
 * not the first reply, and the expiry it would set is the one the entry
 * has (it moves once a second). Most packets of an established flow are so, and skip the
 * conntrack subprograms' call: a call costs as much as a map lookup. The
 * flags are read here only as a mask test, which the verifier does not
 * tell TCP from UDP by (see lb_tcp_flags).
 */
static __always_inline bool lb_ct_quiet(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_ct_value *ct,
					__u32 now, bool reply)
{
	if (lb_tcp_flags(skb, p) & (LB_TCP_SYN | LB_TCP_FIN | LB_TCP_RST))
		return false;
	if (reply && !(ct->flags & LB_CT_F_REPLIED))
		return false;
	return ct->expires == now + lb_ct_timeout(p->tuple.proto, ct->flags);
}

/*
 * Connection outcomes (conn.h), reported once per flow: the backend's
 * first answer to a flow's SYN (a SYN-ACK: it accepts; a RST: it refuses);
 * or, while none came, the client's SYN again: it had no answer within
 * its retransmission timeout (1 s on Linux). LB_CT_F_UNANSWERED keeps
 * the retransmissions after that one from reporting again.
 */
static __always_inline void lb_tc_report_answer(struct __sk_buff *skb, const struct lb_pkt *p,
						const struct lb_ct_value *ct)
{
	struct lb_conn_event e = { .source = LB_CONN_TC, .backend_id = ct->backend_id, .rev_nat_id = ct->rev_nat_id };
	__u8 tcp = lb_tcp_flags(skb, p);

	if (tcp & LB_TCP_RST)
		e.result = LB_CONN_REFUSED;
	else if ((tcp & (LB_TCP_SYN | LB_TCP_ACK)) != (LB_TCP_SYN | LB_TCP_ACK))
		return; /* not an answer to a SYN (UDP, or a flow seen mid-way) */
	__builtin_memcpy(e.addr, p->tuple.src, 16);
	e.port = p->tuple.sport;
	lb_report_conn(&e);
}

static __always_inline __u8 lb_tc_report_unanswered(struct __sk_buff *skb, const struct lb_pkt *p,
						    const struct lb_ct_value *ct, const struct lb_backend *b)
{
	struct lb_conn_event e = { .result = LB_CONN_TIMEOUT, .source = LB_CONN_TC,
				   .backend_id = ct->backend_id, .rev_nat_id = ct->rev_nat_id };

	if (ct->flags & LB_CT_F_UNANSWERED)
		return LB_CT_F_UNANSWERED;
	if ((lb_tcp_flags(skb, p) & (LB_TCP_SYN | LB_TCP_ACK)) != LB_TCP_SYN) /* 0 for UDP */
		return 0;
	__builtin_memcpy(e.addr, b->addr, 16);
	e.port = b->port;
	lb_report_conn(&e);
	return LB_CT_F_UNANSWERED;
}

/*
 * The conntrack bookkeeping of a packet is a subprogram of its own
 * (noinline): its branches on the flow's state then end where it returns,
 * instead of each being verified again through the rewrite after it.
 */

/*
 * lb_ct_refresh_reply updates a flow's state and expiry for its reply p
 * (ct its reply entry, and the forward entry's with it; or its one
 * entry).
 */
static __noinline void lb_ct_refresh_reply(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_ct_value *ct,
					   __u32 now)
{
	struct lb_ct_value other;
	struct lb_ct_key fwd = {};
	__u32 expires;
	__u8 flags;

	if (lb_conn_reports && !(ct->flags & LB_CT_F_REPLIED))
		lb_tc_report_answer(skb, p, ct);
	flags = lb_ct_next_flags(skb, ct->flags, p, true);
	expires = now + lb_ct_timeout(p->tuple.proto, flags);
	if (flags != ct->flags || expires != ct->expires) {
		ct->flags = flags;
		ct->expires = expires;
		if (ct->dir != LB_CT_REPLY)
			return; /* the flow's one entry */
		other = *ct;
		other.dir = LB_CT_FORWARD;
		__builtin_memset(other.peer, 0, sizeof(other.peer));
		other.peer_port = 0;
		__builtin_memcpy(fwd.src, p->tuple.dst, 16);
		__builtin_memcpy(fwd.dst, ct->peer, 16);
		fwd.sport = p->tuple.dport;
		fwd.dport = ct->peer_port;
		fwd.proto = p->tuple.proto;
		fwd.kind = LB_CT_PACKET;
		lb_ct_sync(&fwd, &other, now);
	}
}

/*
 * lb_tc_reply rewrites a reply of a balanced flow (ct its reply entry)
 * with the frontend as source, and keeps the flow's forward entry alive
 * with it.
 */
static __always_inline int lb_tc_reply(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_ct_value *ct, __u32 now)
{
	struct lb_rev_nat_value fe;
	__u32 id = ct->rev_nat_id;

	if (!lb_rev_nat_lookup(id, &fe))
		return TC_ACT_OK; /* the frontend is gone */
	lb_ct_sent_to(ct, fe.addr); /* a NodePort on the any-address */
	if (!lb_ct_quiet(skb, p, ct, now, true))
		lb_ct_refresh_reply(skb, p, ct, now);
	if (lb_rewrite(skb, p, false, fe.addr, fe.port)) {
		lb_count_drop(id, LB_DROP_REWRITE);
		return TC_ACT_SHOT;
	}
	lb_count(id, ct->backend_id, 0, 1, skb->len);
	return TC_ACT_OK;
}

/*
 * lb_ct_anew says whether the client's packet p starts a new connection
 * on the tuple of a flow (ct its forward entry) that never got going: a
 * SYN after the backend refused the flow, or a SYN with another sequence
 * number than the flow's first packet while no reply came (not a
 * retransmission). Such a flow left no TIME_WAIT at the client, and its
 * backend may be out of rotation since: the SYN is balanced anew.
 */
static __always_inline bool lb_ct_anew(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_ct_value *ct)
{
	if ((lb_tcp_flags(skb, p) & (LB_TCP_SYN | LB_TCP_ACK)) != LB_TCP_SYN) /* 0 for UDP */
		return false;
	if (ct->flags & LB_CT_F_REFUSED)
		return true;
	return !(ct->flags & LB_CT_F_REPLIED) && lb_tcp_seq(skb, p) != *(const __be32 *)ct->peer;
}

/*
 * lb_ct_refresh_forward updates a flow's state and expiry for its packet
 * p from the client (ct its forward entry, b its backend), and the reply
 * entry's with it (or ct is its one entry); or, if p starts a new
 * connection (lb_ct_anew), deletes the reply entry and returns 1: the
 * caller balances p anew, which replaces the forward (or one) entry.
 */
static __noinline int lb_ct_refresh_forward(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_ct_value *ct,
					    const struct lb_backend *b, __u32 now)
{
	struct lb_ct_value other;
	struct lb_ct_key reply = {};
	__u32 expires;
	__u8 flags;

	if (lb_ct_anew(skb, p, ct)) {
		if (ct->dir == LB_CT_FORWARD) {
			lb_ct_reply_key(&reply, p, b->addr, b->port);
			bpf_map_delete_elem(&lb_ct, &reply);
		}
		return 1;
	}
	flags = lb_ct_next_flags(skb, ct->flags, p, false);
	if (lb_conn_reports && !(ct->flags & (LB_CT_F_REPLIED | LB_CT_F_CLOSING)))
		flags |= lb_tc_report_unanswered(skb, p, ct, b);
	expires = now + lb_ct_timeout(p->tuple.proto, flags);
	if (flags != ct->flags || expires != ct->expires) {
		ct->flags = flags;
		ct->expires = expires;
		if (ct->dir != LB_CT_FORWARD)
			return 0; /* the flow's one entry */
		other = *ct;
		other.dir = LB_CT_REPLY;
		__builtin_memcpy(other.peer, p->tuple.dst, 16);
		other.peer_port = p->tuple.dport;
		lb_ct_reply_key(&reply, p, b->addr, b->port);
		lb_ct_sync(&reply, &other, now);
	}
	return 0;
}

/*
 * lb_tc_forward sends a packet of an established flow (ct its forward
 * entry, already refreshed) to its backend b.
 */
static __always_inline int lb_tc_forward(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_ct_value *ct,
					 const struct lb_backend *b)
{
	if (lb_rewrite(skb, p, true, b->addr, b->port)) {
		lb_count_drop(ct->rev_nat_id, LB_DROP_REWRITE);
		return TC_ACT_SHOT;
	}
	lb_count(ct->rev_nat_id, ct->backend_id, 0, 1, skb->len);
	return TC_ACT_OK;
}

/*
 * lb_tc handles a packet: a reply of a balanced flow gets the frontend as
 * its source; with forward, a packet of an established flow goes to its
 * backend, and the first packet of a flow to a frontend to a new one. A
 * flow whose backend is gone from lb_backends is balanced anew, and so is
 * a new connection on the tuple of one that never got going (lb_ct_anew).
 */
static __always_inline int lb_tc(struct __sk_buff *skb, bool forward, bool internal)
{
	struct lb_pkt p = {};
	struct lb_ct_value *ct;
	union { /* the one entry's key is used up before the backend is copied */
		struct lb_backend be;
		struct lb_ct_key k;
	} u;
	__u32 now, id;
	bool proxied = false, held = false, held_reply = false;

	switch (lb_parse(skb, &p)) {
	case LB_PARSE_OK:
		break;
	case LB_PARSE_NO_FIRST:
		/* Perhaps of a balanced flow, which cannot be told: never
		 * passed untranslated. */
		lb_count_drop(0, LB_DROP_FRAG_NO_FIRST);
		return TC_ACT_SHOT;
	case LB_PARSE_ICMP:
		return lb_tc_icmp_error(skb, &p);
	default:
		return TC_ACT_OK;
	}
	now = lb_now();
	if (forward) {
		/* A client's packet of a flow with one entry (most flows). */
		ct = lb_ct_one(&p, false, now, &held, &u.k);
		if (ct) {
			if (lb_backend_lookup(ct->backend_id, &u.be) &&
			    (lb_ct_quiet(skb, &p, ct, now, false) || !lb_ct_refresh_forward(skb, &p, ct, &u.be, now)))
				return lb_tc_forward(skb, &p, ct, &u.be);
			goto balance;
		}
		/* A flow with two entries whose marker the LRU took? */
		held = held || lb_ct_port_used(lb_dp_ct_pair_ports, p.tuple.sport);
		/* Not a client's packet of a flow we know; and, if no client
		 * ever used its destination port, no reply either: a new flow
		 * (or none of ours) pays no lookup that misses for it. */
		if (!held && !lb_ct_port_used(lb_dp_ct_ports, p.tuple.dport))
			goto balance;
	}
	/* A reply of a flow with one entry. */
	ct = lb_ct_one(&p, true, now, &held_reply, &u.k);
	if (ct)
		return lb_tc_reply(skb, &p, ct, now);
	held_reply = held_reply || lb_ct_port_used(lb_dp_ct_pair_ports, p.tuple.dport);
	/* A flow with two entries keeps its client's key held, or its port
	 * in lb_dp_ct_pair_ports: if neither, there is none to look for (a
	 * new flow). */
	if ((forward && held) || held_reply) {
		ct = bpf_map_lookup_elem(&lb_ct, &p.tuple);
		if (ct && lb_ct_live(ct, now)) {
			if (ct->dir == LB_CT_REPLY)
				return lb_tc_reply(skb, &p, ct, now);
			id = ct->backend_id;
			/* A flow to the L7 proxy (backend 0) follows its
			 * frontend's master entry: to the proxy while the flag
			 * stays. */
			proxied = id == 0;
			if (forward && lb_backend_lookup(id, &u.be) &&
			    (lb_ct_quiet(skb, &p, ct, now, false) || !lb_ct_refresh_forward(skb, &p, ct, &u.be, now)))
				return lb_tc_forward(skb, &p, ct, &u.be);
		}
	}
balance:
	if (!forward || p.later_frag) /* a later fragment follows its first one */
		return TC_ACT_OK;
	p.client_held = held;
	return lb_tc_new_flow(skb, &p, internal, now, proxied);
}

/* Ingress of a device that brings traffic from outside: external scope. */
SEC("tc")
int lb_tc_ingress(struct __sk_buff *skb)
{
	return lb_tc(skb, true, false);
}

/*
 * Ingress (on the host's side) of a device that brings traffic from a
 * local workload: internal scope.
 */
SEC("tc")
int lb_tc_workload(struct __sk_buff *skb)
{
	return lb_tc(skb, true, true);
}

/* Egress: replies of local backends leave with the frontend as source. */
SEC("tc")
int lb_tc_egress(struct __sk_buff *skb)
{
	return lb_tc(skb, false, false);
}

#endif /* __LBSTATE_TC_H */
