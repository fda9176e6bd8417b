/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ICMP and ICMPv6 errors about balanced flows (destination unreachable,
 * fragmentation needed / packet too big, time exceeded, parameter
 * problem) translated as the flow's packets are, so that path-MTU
 * discovery and unreachable reports reach the socket that sent what they
 * quote. An error quotes a packet of the flow as it was on the wire:
 *
 *   - a client's packet after DNAT (client -> backend), in an error on its
 *     way back to the client: the quote's destination becomes the
 *     frontend again, and the error's source too if the backend sent it;
 *   - a reply after reverse NAT (frontend -> client), in an error sent to
 *     the frontend: the quote's source becomes the backend, and so does
 *     the error's destination.
 *
 * The quoted packet reversed is a packet of the flow: a reply in the
 * first case, a client's packet in the second, which finds the flow's
 * one entry, or its reply or forward entry. Every field
 * changed in the quote (address, IPv4 header checksum, port, L4
 * checksum if quoted) is added into the ICMP checksum; ICMPv6's also
 * covers the outer addresses. An error about a balanced flow that cannot
 * be translated is dropped and counted, never passed as it came.
 */
#ifndef __LBSTATE_ICMP_H
#define __LBSTATE_ICMP_H

/* lb_csum_add_diff adds a bpf_csum_diff result into a checksum field. */
static __always_inline __sum16 lb_csum_add_diff(__sum16 check, __s64 diff)
{
	__u64 sum = (__u16)~check;

	sum += (__u32)diff;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__sum16)~sum;
}

/* lb_icmp_quote is the packet an ICMP error quotes. */
struct lb_icmp_quote {
	struct lb_ct_key key; /* the quote reversed: a conntrack key of its flow */
	__u32 ip_off;         /* its IP header */
	__u32 l4_off;         /* its L4 header */
	__u32 csum_off;       /* its L4 checksum, 0 if not quoted or UDP's zero */
} __attribute__((aligned(8))); /* lb_addr_eq reads 8 bytes at a time */

/* lb_icmp_parse_quote reads the quoted packet of the error p; false if it is no TCP or UDP packet of p's family. */
static __always_inline bool lb_icmp_parse_quote(struct __sk_buff *skb, const struct lb_pkt *p, struct lb_icmp_quote *q)
{
	__u8 proto, hdr[10]; /* the quote's IPv4 header up to its protocol, or IPv6's up to its next header */
	__be16 ports[2], csum;
	__u32 fid, off;
	__u16 frag = 0;

	/* (Read in pieces, the addresses straight into the key: this runs
	 * as a subprogram of the programs, whose stacks add up.) */
	q->ip_off = p->l4_off + 8;
	if (q->ip_off > LB_L4_OFF_MAX + 8 || bpf_skb_load_bytes(skb, q->ip_off, hdr, sizeof(hdr)))
		return false;
	if (p->v4) {
		if (hdr[0] >> 4 != 4 || (hdr[0] & 0xf) < 5 || (hdr[6] & 0x1f) || hdr[7]) /* a later fragment has no ports */
			return false;
		proto = hdr[9];
		off = q->ip_off + (hdr[0] & 0xf) * 4;
		q->key.src[10] = q->key.src[11] = q->key.dst[10] = q->key.dst[11] = 0xff;
		/* reversed: the quote's destination is the key's source */
		if (bpf_skb_load_bytes(skb, q->ip_off + 16, &q->key.src[12], 4) ||
		    bpf_skb_load_bytes(skb, q->ip_off + 12, &q->key.dst[12], 4))
			return false;
	} else {
		if (hdr[0] >> 4 != 6)
			return false;
		proto = hdr[6];
		off = q->ip_off + 40;
		if (bpf_skb_load_bytes(skb, q->ip_off + 24, q->key.src, 16) ||
		    bpf_skb_load_bytes(skb, q->ip_off + 8, q->key.dst, 16))
			return false;
		if (!lb_ipv6_l4(skb, &proto, &off, &fid, &frag) || (frag & ~1))
			return false;
	}
	if ((proto != IPPROTO_TCP && proto != IPPROTO_UDP) || off > LB_INNER_OFF_MAX)
		return false;
	if (bpf_skb_load_bytes(skb, off, ports, sizeof(ports)))
		return false;
	q->l4_off = off;
	q->key.sport = ports[1];
	q->key.dport = ports[0];
	q->key.proto = proto;
	q->key.kind = LB_CT_PACKET;
	q->csum_off = off + (proto == IPPROTO_TCP ? offsetof(struct tcphdr, check) : offsetof(struct udphdr, check));
	if (bpf_skb_load_bytes(skb, q->csum_off, &csum, sizeof(csum)) || (proto == IPPROTO_UDP && !csum))
		q->csum_off = 0; /* not quoted, or none */
	return true;
}

/*
 * lb_icmp_rewrite_quote sets the quote's source (src) or destination
 * address and port to addr and port, adding each change into the quote's
 * checksums and the ICMP checksum at icmp_csum.
 */
static __always_inline int lb_icmp_rewrite_quote(struct __sk_buff *skb, const struct lb_pkt *p, const struct lb_icmp_quote *q,
						 bool src, const __u8 addr[16], __be16 port)
{
	__u32 icmp_csum = p->l4_off + 2;
	__u32 port_off = q->l4_off + (src ? 0 : 2);
	__be16 old_port, check, new_check;
	__u8 from[16];
	__s64 diff;

	if (bpf_skb_load_bytes(skb, port_off, &old_port, 2))
		return -1;
	if (p->v4) {
		__u32 addr_off = q->ip_off + (src ? 12 : 16);
		__be32 a, b = *(const __be32 *)&addr[12];

		if (bpf_skb_load_bytes(skb, addr_off, &a, 4) ||
		    bpf_skb_load_bytes(skb, q->ip_off + 10, &check, 2))
			return -1;
		new_check = lb_csum_replace4(check, a, b);
		if (bpf_skb_store_bytes(skb, addr_off, &b, 4, 0) ||
		    bpf_skb_store_bytes(skb, q->ip_off + 10, &new_check, 2, 0) ||
		    bpf_l4_csum_replace(skb, icmp_csum, a, b, 4) ||
		    bpf_l4_csum_replace(skb, icmp_csum, check, new_check, 2))
			return -1;
		diff = bpf_csum_diff(&a, 4, &b, 4, 0);
	} else {
		__u32 addr_off = q->ip_off + (src ? 8 : 24);

		if (bpf_skb_load_bytes(skb, addr_off, from, 16))
			return -1;
		diff = bpf_csum_diff((__be32 *)from, 16, (__be32 *)addr, 16, 0);
		if (diff < 0 || bpf_skb_store_bytes(skb, addr_off, addr, 16, 0) ||
		    bpf_l4_csum_replace(skb, icmp_csum, 0, diff, 0))
			return -1;
	}
	if (diff < 0)
		return -1;
	if (q->csum_off) { /* the quote's own L4 checksum: its pseudo-header and port */
		if (bpf_skb_load_bytes(skb, q->csum_off, &check, 2))
			return -1;
		new_check = lb_csum_add_diff(check, diff);
		new_check = lb_csum_replace4(new_check, old_port, port);
		if (bpf_skb_store_bytes(skb, q->csum_off, &new_check, 2, 0) ||
		    bpf_l4_csum_replace(skb, icmp_csum, check, new_check, 2))
			return -1;
	}
	if (bpf_skb_store_bytes(skb, port_off, &port, 2, 0) ||
	    bpf_l4_csum_replace(skb, icmp_csum, old_port, port, 2))
		return -1;
	return 0;
}

/*
 * lb_icmp_rewrite_outer sets the error's own source (src) or destination
 * address, fixing the IPv4 header checksum, or the ICMPv6 checksum, whose
 * pseudo-header holds it.
 */
static __always_inline int lb_icmp_rewrite_outer(struct __sk_buff *skb, const struct lb_pkt *p, bool src, const __u8 addr[16])
{
	const __u8 *old = src ? p->tuple.src : p->tuple.dst;
	__s64 diff;

	if (p->v4) {
		__u32 addr_off = LB_ETH_HLEN + (src ? 12 : 16);
		__be32 a = *(const __be32 *)&old[12], b = *(const __be32 *)&addr[12];
		__be16 check, new_check;

		if (bpf_skb_load_bytes(skb, LB_ETH_HLEN + 10, &check, 2))
			return -1;
		new_check = lb_csum_replace4(check, a, b);
		if (bpf_skb_store_bytes(skb, LB_ETH_HLEN + 10, &new_check, 2, 0) ||
		    bpf_skb_store_bytes(skb, addr_off, &b, 4, 0))
			return -1;
		return 0;
	}
	diff = bpf_csum_diff((__be32 *)old, 16, (__be32 *)addr, 16, 0);
	if (diff < 0 ||
	    bpf_l4_csum_replace(skb, p->l4_off + 2, 0, diff, BPF_F_PSEUDO_HDR | lb_l4_csum_ipv6) ||
	    bpf_skb_store_bytes(skb, LB_ETH_HLEN + (src ? 8 : 24), addr, 16, 0))
		return -1;
	return 0;
}

/*
 * lb_dp_icmp_scratch (the datapath's own, per CPU) holds what
 * lb_tc_icmp_error copies: on its stack it would take the calling
 * program's combined stack over the verifier's 512 bytes.
 */
union lb_icmp_scratch {
	struct lb_rev_nat_value fe;
	struct lb_backend be;
	struct lb_ct_key k; /* before: a flow's one entry's key */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, union lb_icmp_scratch);
} lb_dp_icmp_scratch SEC(".maps");

/*
 * lb_tc_icmp_error translates an ICMP(v6) error p about a balanced flow;
 * others pass.
 */
static __noinline int lb_tc_icmp_error(struct __sk_buff *skb, const struct lb_pkt *p)
{
	struct lb_icmp_quote q = {};
	union lb_icmp_scratch *to;
	struct lb_ct_value *ct;
	__u32 id, zero = 0;
	bool reply;

	to = bpf_map_lookup_elem(&lb_dp_icmp_scratch, &zero);
	if (!to || !lb_icmp_parse_quote(skb, p, &q))
		return TC_ACT_OK;
	/* The flow's one entry first, as lb_tc looks: a flow balanced anew
	 * from two entries into one leaves its old forward entry live. */
	ct = lb_ct_find_flow(&q.key, &to->k, lb_now(), &reply);
	if (!ct) {
		ct = bpf_map_lookup_elem(&lb_ct, &q.key);
		if (!ct || !lb_ct_live(ct, lb_now()))
			return TC_ACT_OK;
		reply = ct->dir == LB_CT_REPLY;
	}
	id = ct->rev_nat_id;
	if (reply) {
		/* The quote went client -> backend: it names the frontend again. */
		if (!lb_rev_nat_lookup(id, &to->fe)) {
			lb_count_drop(id, LB_DROP_ICMP);
			return TC_ACT_SHOT;
		}
		/* A NodePort on the any-address: the client sent to a node
		 * address, which its replies come from too. */
		lb_ct_sent_to(ct, to->fe.addr);
		if (lb_icmp_rewrite_quote(skb, p, &q, false, to->fe.addr, to->fe.port) ||
		    (lb_addr_eq(p->tuple.src, q.key.src) && lb_icmp_rewrite_outer(skb, p, true, to->fe.addr))) {
			lb_count_drop(id, LB_DROP_ICMP);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
	}
	/* The quote went frontend -> client: it names the backend. */
	if (!ct->backend_id || !lb_backend_lookup(ct->backend_id, &to->be)) {
		lb_count_drop(id, LB_DROP_ICMP);
		return TC_ACT_SHOT;
	}
	if (lb_icmp_rewrite_quote(skb, p, &q, true, to->be.addr, to->be.port) ||
	    (lb_addr_eq(p->tuple.dst, q.key.dst) && lb_icmp_rewrite_outer(skb, p, false, to->be.addr))) {
		lb_count_drop(id, LB_DROP_ICMP);
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}

#endif /* __LBSTATE_ICMP_H */
