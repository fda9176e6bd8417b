/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing a packet for the tc programs: Ethernet, IPv4 or IPv6 (its
 * extension headers skipped), TCP or UDP, fragments included. Only the
 * first fragment of a datagram carries its ports: lb_parse remembers
 * them by (source, destination, protocol, fragment ID) in lb_dp_frags,
 * so that the later fragments find the first one's conntrack entries,
 * and with them its backend (Cilium does the same).
 */
#ifndef __LBSTATE_PARSE_H
#define __LBSTATE_PARSE_H

#define LB_ETH_HLEN 14

/*
 * The furthest L4 header the programs rewrite: an IPv4 header with
 * options, or an IPv6 header with a few extension headers.
 */
#define LB_L4_OFF_MAX (LB_ETH_HLEN + 40 + 128)
#define LB_IPV6_EXT_MAX 4 /* extension headers skipped before giving up */

/* lb_pkt is a parsed packet: its tuple is its lb_ct key. */
struct lb_pkt {
	struct lb_ct_key tuple;
	__u32 l4_off;
	__u32 csum_off; /* of the L4 checksum, from the packet's start */
	bool v4;
	/* A fragment after the first: no L4 header, the ports are the first
	 * fragment's. Only its addresses are rewritten. */
	bool later_frag;
	/* The client may have a flow with two entries (tc.h sets it: an
	 * entry under its key in lb_ct, or its port in lb_dp_ct_pair_ports). */
	bool client_held;
};

/* TCP header flags (the byte at offset 13). */
#define LB_TCP_FIN 0x01
#define LB_TCP_SYN 0x02
#define LB_TCP_RST 0x04
#define LB_TCP_ACK 0x10

/* What lb_parse found. */
enum {
	LB_PARSE_PASS = 0,     /* not a packet this datapath balances */
	LB_PARSE_OK = 1,       /* p is filled */
	LB_PARSE_NO_FIRST = 2, /* a later fragment whose first one was not seen */
	LB_PARSE_ICMP = 3,     /* an ICMP(v6) error: p has its addresses and l4_off (icmp.h) */
};

#define LB_IPPROTO_ICMPV6 58

#define LB_ICMP_DEST_UNREACH 3
#define LB_ICMP_TIME_EXCEEDED 11
#define LB_ICMP_PARAMETERPROB 12
#define LB_ICMP6_DEST_UNREACH 1
#define LB_ICMP6_PKT_TOOBIG 2
#define LB_ICMP6_TIME_EXCEED 3
#define LB_ICMP6_PARAMPROB 4

#define LB_INNER_OFF_MAX (LB_L4_OFF_MAX + 8 + 40 + 64)

/* lb_icmp_is_error says whether an ICMP(v6) type quotes a packet. */
static __always_inline bool lb_icmp_is_error(bool v4, __u8 type)
{
	if (v4)
		return type == LB_ICMP_DEST_UNREACH || type == LB_ICMP_TIME_EXCEEDED || type == LB_ICMP_PARAMETERPROB;
	return type >= LB_ICMP6_DEST_UNREACH && type <= LB_ICMP6_PARAMPROB;
}


/*
 * lb_dp_frags is the datapath's own map (the loader creates it with the
 * programs, unpinned): a datagram's fragments arrive within a reassembly
 * timeout, and a restart loses only the datagrams in flight.
 */
struct lb_frag_key {
	__u8 src[16];
	__u8 dst[16];
	__u32 id; /* IPv4: the IP ID; IPv6: the fragment header's identification */
	__u8 proto;
	__u8 pad[3];
};

struct lb_frag_value {
	__be16 sport;
	__be16 dport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct lb_frag_key);
	__type(value, struct lb_frag_value);
} lb_dp_frags SEC(".maps");

/* IPv6 extension headers (linux/in6.h). */
#define LB_IP6_HOPOPTS 0
#define LB_IP6_ROUTING 43
#define LB_IP6_FRAGMENT 44
#define LB_IP6_AH 51
#define LB_IP6_DSTOPTS 60

/*
 * lb_ipv6_l4 skips the extension headers after the IPv6 header, setting
 * *proto and *off to the L4 header's; *frag_id and *frag_off describe a
 * fragment header (*frag_off: its offset and M flag, 0 if none). False if
 * the L4 header cannot be found: too many headers, or a routing header
 * with segments left (the destination is not the final one).
 */
static __always_inline bool lb_ipv6_l4(struct __sk_buff *skb, __u8 *proto, __u32 *off, __u32 *frag_id,
				       __u16 *frag_off)
{
	__u8 hdr[8];

	for (int i = 0; i < LB_IPV6_EXT_MAX; i++) {
		switch (*proto) {
		case LB_IP6_HOPOPTS:
		case LB_IP6_DSTOPTS:
		case LB_IP6_ROUTING:
		case LB_IP6_AH:
		case LB_IP6_FRAGMENT:
			break;
		default:
			return true;
		}
		if (*off > LB_L4_OFF_MAX || bpf_skb_load_bytes(skb, *off, hdr, sizeof(hdr)))
			return false;
		switch (*proto) {
		case LB_IP6_ROUTING:
			if (hdr[3]) /* segments left */
				return false;
			*off += (hdr[1] + 1) * 8;
			break;
		case LB_IP6_AH:
			*off += (hdr[1] + 2) * 4;
			break;
		case LB_IP6_FRAGMENT:
			*frag_off = bpf_ntohs(*(__be16 *)&hdr[2]) & 0xfff9; /* offset and M */
			__builtin_memcpy(frag_id, &hdr[4], 4);
			*off += 8;
			break;
		default:
			*off += (hdr[1] + 1) * 8;
		}
		*proto = hdr[0];
	}
	return false;
}

/*
 * lb_parse fills p from the packet's headers (LB_PARSE_OK), or says the
 * packet is not one this datapath balances (LB_PARSE_PASS), or is a later
 * fragment whose first one it has not seen (LB_PARSE_NO_FIRST).
 */
static __always_inline int lb_parse(struct __sk_buff *skb, struct lb_pkt *p)
{
	struct lb_frag_key fk = {};
	struct lb_frag_value *fv, ports;
	void *data, *end;
	struct ethhdr *eth;
	__u16 frag_off = 0; /* a fragment's offset (bits 15-3) and M flag (bit 0) */
	__u8 proto;

	/* Headers may sit beyond the linear part; pull what an IPv6 TCP header needs. */
	if (skb->data + LB_ETH_HLEN + sizeof(struct ipv6hdr) + sizeof(struct tcphdr) > skb->data_end)
		bpf_skb_pull_data(skb, LB_ETH_HLEN + sizeof(struct ipv6hdr) + sizeof(struct tcphdr));
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return LB_PARSE_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return LB_PARSE_PASS;
		if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
			__u16 fo = bpf_ntohs(ip->frag_off);

			/* As IPv6 has it: the offset in bits 15-3, M in bit 0. */
			frag_off = (fo & IP_OFFSET) << 3 | !!(fo & IP_MF);
			fk.id = ip->id;
		}
		proto = ip->protocol;
		p->v4 = true;
		p->l4_off = LB_ETH_HLEN + ip->ihl * 4;
		p->tuple.src[10] = p->tuple.src[11] = 0xff;
		p->tuple.dst[10] = p->tuple.dst[11] = 0xff;
		__builtin_memcpy(&p->tuple.src[12], &ip->saddr, 4);
		__builtin_memcpy(&p->tuple.dst[12], &ip->daddr, 4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u32 off = LB_ETH_HLEN + sizeof(*ip6);

		if ((void *)(ip6 + 1) > end)
			return LB_PARSE_PASS;
		proto = ip6->nexthdr;
		p->v4 = false;
		__builtin_memcpy(p->tuple.src, &ip6->saddr, 16);
		__builtin_memcpy(p->tuple.dst, &ip6->daddr, 16);
		if (!lb_ipv6_l4(skb, &proto, &off, &fk.id, &frag_off))
			return LB_PARSE_PASS;
		p->l4_off = off;
	} else {
		return LB_PARSE_PASS;
	}
	if ((proto == IPPROTO_ICMP && p->v4) || (proto == LB_IPPROTO_ICMPV6 && !p->v4)) {
		__u8 type;

		if (frag_off || p->l4_off > LB_L4_OFF_MAX || bpf_skb_load_bytes(skb, p->l4_off, &type, 1) ||
		    !lb_icmp_is_error(p->v4, type))
			return LB_PARSE_PASS;
		p->tuple.proto = proto;
		return LB_PARSE_ICMP;
	}
	if (proto == IPPROTO_TCP)
		p->csum_off = p->l4_off + offsetof(struct tcphdr, check);
	else if (proto == IPPROTO_UDP)
		p->csum_off = p->l4_off + offsetof(struct udphdr, check);
	else
		return LB_PARSE_PASS;
	if (p->l4_off > LB_L4_OFF_MAX)
		return LB_PARSE_PASS;
	p->tuple.proto = proto;
	p->tuple.kind = LB_CT_PACKET;
	if (frag_off) {
		__builtin_memcpy(fk.src, p->tuple.src, 16);
		__builtin_memcpy(fk.dst, p->tuple.dst, 16);
		fk.proto = proto;
	}
	if (frag_off & ~1) { /* a later fragment: the first one's ports */
		fv = bpf_map_lookup_elem(&lb_dp_frags, &fk);
		if (!fv)
			return LB_PARSE_NO_FIRST;
		p->tuple.sport = fv->sport;
		p->tuple.dport = fv->dport;
		p->later_frag = true;
		return LB_PARSE_OK;
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (data + p->l4_off + sizeof(ports) <= end) /* read directly: no helper call */
		__builtin_memcpy(&ports, data + p->l4_off, sizeof(ports));
	else if (bpf_skb_load_bytes(skb, p->l4_off, &ports, sizeof(ports)))
		return LB_PARSE_PASS;
	p->tuple.sport = ports.sport;
	p->tuple.dport = ports.dport;
	if (frag_off) /* the first fragment: remember its ports for the others */
		bpf_map_update_elem(&lb_dp_frags, &fk, &ports, BPF_ANY);
	return LB_PARSE_OK;
}

#endif /* __LBSTATE_PARSE_H */
