/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rewriting a packet's address and port (NAT), with its checksums.
 *
 * Speed: a helper call is the dearest thing an established flow's packet
 * does (each call and return pays the CPU's speculation mitigations), and
 * the L4 checksum took two or three of them per packet (bpf_l4_csum_replace
 * for the address and the port, bpf_csum_diff for an IPv6 address). Most
 * packets do not need them: a packet whose L4 checksum is a plain field
 * (ip_summed CHECKSUM_NONE or CHECKSUM_UNNECESSARY: no offload holds a
 * partial sum in it, no skb->csum covers its bytes) gets its checksum
 * updated here with one RFC 1624 sum over the address and the port. Only
 * CHECKSUM_COMPLETE and CHECKSUM_PARTIAL packets, and those whose L4
 * header is not in the linear part, take the helpers.
 */
#ifndef __LBSTATE_REWRITE_H
#define __LBSTATE_REWRITE_H

/*
 * lb_store writes len bytes at off, directly when they are in the linear
 * part (no helper call), else with bpf_skb_store_bytes.
 */
static __always_inline int lb_store(struct __sk_buff *skb, __u32 off, const void *from, __u32 len)
{
	void *data, *end;

	barrier_var(skb); /* see lb_tcp_flags */
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;

	if (off > LB_L4_OFF_MAX + 4) /* a bound for the verifier: headers only */
		return -1;
	if (data + off + 16 > end)
		return bpf_skb_store_bytes(skb, off, from, len, 0);
	if (len == 16)
		__builtin_memcpy(data + off, from, 16);
	else if (len == 4)
		__builtin_memcpy(data + off, from, 4);
	else
		__builtin_memcpy(data + off, from, 2);
	return 0;
}

/* lb_csum_replace4 updates an Internet checksum for a 32-bit word's change (RFC 1624). */
static __always_inline __sum16 lb_csum_replace4(__sum16 check, __be32 from, __be32 to)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~from + (__u16)~(from >> 16) + (__u16)to + (__u16)(to >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__sum16)~sum;
}

/*
 * BPF_F_IPV6 where the kernel's bpf_l4_csum_replace knows it (6.16), else
 * 0: set by the loader from a probe (csumprobe.go). An IPv6 address
 * change alters the sum of a CHECKSUM_COMPLETE packet's bytes by as much
 * as the L4 checksum's change takes away, so skb->csum must stay; without
 * the flag the helper adjusts it as for IPv4, whose header checksum
 * balances the address instead.
 */
volatile const __u32 lb_l4_csum_ipv6;

/*
 * lb_rewrite_helpers is lb_rewrite for any packet: the L4 checksum goes
 * through the helpers, which update an offloaded (CHECKSUM_PARTIAL) one
 * as the hardware expects, only its pseudo-header part, and skb->csum of
 * a CHECKSUM_COMPLETE one.
 */
static __always_inline int lb_rewrite_helpers(struct __sk_buff *skb, const struct lb_pkt *p, bool dst,
				      const __u8 addr[16], __be16 port)
{
	const __u8 *old = dst ? p->tuple.dst : p->tuple.src;
	__be16 old_port = dst ? p->tuple.dport : p->tuple.sport;
	__u32 port_off = p->l4_off + (dst ? 2 : 0);
	__u64 l4 = p->tuple.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;

	if (p->v4) {
		__u32 addr_off = LB_ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
		__be32 from = *(const __be32 *)&old[12], to = *(const __be32 *)&addr[12];
		struct iphdr *ip;
		void *end;

		if (from != to) {
			if (!p->later_frag &&
			    bpf_l4_csum_replace(skb, p->csum_off, from, to, l4 | BPF_F_PSEUDO_HDR | sizeof(to)))
				return -1;
			barrier_var(skb); /* see lb_tcp_flags */
			ip = (void *)(long)skb->data + LB_ETH_HLEN;
			end = (void *)(long)skb->data_end;
			if ((void *)(ip + 1) > end)
				return -1;
			ip->check = lb_csum_replace4(ip->check, from, to);
			if (lb_store(skb, addr_off, &to, sizeof(to)))
				return -1;
		}
	} else {
		__u32 addr_off = LB_ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
		__u8 from[16], to[16];
		__s64 diff;

		__builtin_memcpy(from, old, 16);
		__builtin_memcpy(to, addr, 16);
		diff = bpf_csum_diff((__be32 *)from, 16, (__be32 *)to, 16, 0);
		if (p->later_frag)
			return lb_store(skb, addr_off, to, 16);
		if (diff < 0 ||
		    bpf_l4_csum_replace(skb, p->csum_off, 0, diff, l4 | BPF_F_PSEUDO_HDR | lb_l4_csum_ipv6) ||
		    lb_store(skb, addr_off, to, 16))
			return -1;
	}
	if (old_port != port && !p->later_frag) {
		if (bpf_l4_csum_replace(skb, p->csum_off, old_port, port, l4 | sizeof(port)) ||
		    lb_store(skb, port_off, &port, sizeof(port)))
			return -1;
	}
	return 0;
}

/* ip_summed values of the kernel's sk_buff (include/linux/skbuff.h). */
#define LB_CHECKSUM_UNNECESSARY 1

/* The one field of the kernel's sk_buff read, by CO-RE. */
struct sk_buff___lb {
	__u8 ip_summed : 2;
} __attribute__((preserve_access_index));

/*
 * Linux 6.3; weak, so that an older kernel loads the programs and every
 * packet takes the helpers. The verifier turns the call into a move.
 */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/* lb_csum_plain says whether skb's L4 checksum is a plain field (see above). */
static __always_inline bool lb_csum_plain(struct __sk_buff *skb)
{
	struct sk_buff___lb *k;

	if (!bpf_cast_to_kern_ctx)
		return false;
	k = bpf_cast_to_kern_ctx(skb);
	return BPF_CORE_READ_BITFIELD(k, ip_summed) <= LB_CHECKSUM_UNNECESSARY;
}

/* lb_csum_fold folds a sum of 16- and 32-bit words into 16 bits, one's complement. */
static __always_inline __u16 lb_csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/*
 * lb_rewrite_plain is lb_rewrite for a packet whose L4 checksum is a
 * plain field, all in the packet's linear part: 0 when done, 1 when the
 * headers are not all there (the caller takes the helpers), the packet
 * untouched.
 */
static __always_inline int lb_rewrite_plain(struct __sk_buff *skb, const struct lb_pkt *p, bool dst,
					    const __u8 addr[16], __be16 port)
{
	void *data, *end;
	const __be32 *from = (const __be32 *)(dst ? p->tuple.dst : p->tuple.src), *to = (const __be32 *)addr;
	__be16 old_port = dst ? p->tuple.dport : p->tuple.sport;
	__u32 l4 = p->l4_off, csum_off = p->csum_off;
	__be16 *ports, *check;
	__u16 sum16;
	__u64 sum;

	if (l4 > LB_L4_OFF_MAX || csum_off > LB_L4_OFF_MAX + 16)
		return 1;
	barrier_var(skb); /* see lb_tcp_flags */
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ports = data + l4;
	check = data + csum_off;
	if ((void *)(ports + 2) > end || (void *)(check + 1) > end)
		return 1;
	/* RFC 1624: HC' = ~(~HC + ~m + m'), for every word m changed. */
	sum = (__u16)~*check + (__u16)~old_port + (__u32)port;
	if (p->v4) {
		struct iphdr *ip = data + LB_ETH_HLEN;

		if ((void *)(ip + 1) > end)
			return 1;
		sum += (__u32)~from[3] + (__u64)to[3];
		ip->check = lb_csum_replace4(ip->check, from[3], to[3]);
		if (dst)
			ip->daddr = to[3];
		else
			ip->saddr = to[3];
	} else {
		struct ipv6hdr *ip6 = data + LB_ETH_HLEN;

		if ((void *)(ip6 + 1) > end)
			return 1;
		sum += (__u32)~from[0] + (__u64)to[0] + (__u32)~from[1] + (__u64)to[1] +
		       (__u32)~from[2] + (__u64)to[2] + (__u32)~from[3] + (__u64)to[3];
		if (dst)
			__builtin_memcpy(&ip6->daddr, to, 16);
		else
			__builtin_memcpy(&ip6->saddr, to, 16);
	}
	ports[dst ? 1 : 0] = port;
	/* A UDP checksum of 0 is none (IPv4), and stays; a computed 0 is sent
	 * as 0xffff (as the helpers' BPF_F_MARK_MANGLED_0 do). */
	if (p->tuple.proto == IPPROTO_UDP && !*check)
		return 0;
	sum16 = ~lb_csum_fold(sum);
	if (p->tuple.proto == IPPROTO_UDP && !sum16)
		sum16 = 0xffff;
	*check = sum16;
	return 0;
}

/*
 * lb_rewrite sets the packet's destination (dst) or source address and
 * port, fixing the L3 and L4 checksums incrementally: by itself when the
 * L4 checksum is a plain field, else through the helpers.
 */
static __always_inline int lb_rewrite(struct __sk_buff *skb, const struct lb_pkt *p, bool dst,
				      const __u8 addr[16], __be16 port)
{
	if (!p->later_frag && lb_csum_plain(skb) && !lb_rewrite_plain(skb, p, dst, addr, port))
		return 0;
	return lb_rewrite_helpers(skb, p, dst, addr, port);
}

#endif /* __LBSTATE_REWRITE_H */
