/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For tests only; the loader never attaches these. lb_probe_slots reads
 * one ID of lb_backends or lb_rev_nat again and again (bpf_loop) while a
 * test rewrites its slot from Go, and counts the copies it got whose
 * fields are not those the test wrote for that ID: torn reads. The test
 * writes every field of ID id as a function of id (lb_probe_whole).
 *
 * Input packet: Ethernet header, then __u32 id, __u32 map (0: lb_backends,
 * 1: lb_rev_nat). Returns hits << 16 | torn.
 */
#ifndef __LBSTATE_PROBE_H
#define __LBSTATE_PROBE_H

#define LB_PROBE_READS 4096

struct lb_probe_ctx {
	__u32 id;
	__u32 map;
	__u32 hits;
	__u32 torn;
};

static __always_inline bool lb_probe_whole(const __u8 addr[16], const __u8 port[2], __u32 id)
{
	const __u32 *w = (const __u32 *)addr;

	return w[0] == id && w[1] == id && w[2] == id && w[3] == id &&
	       port[0] == (__u8)id && port[1] == (__u8)(id >> 8);
}

static long lb_probe_one(__u64 i, void *data)
{
	struct lb_probe_ctx *c = data;
	bool whole;

	if (c->map == 0) {
		struct lb_backend b;

		if (!lb_backend_lookup(c->id, &b))
			return 0;
		whole = lb_probe_whole(b.addr, (const __u8 *)&b.port, c->id) && b.cluster_id == c->id;
	} else {
		struct lb_rev_nat_value fe;

		if (!lb_rev_nat_lookup(c->id, &fe))
			return 0;
		whole = lb_probe_whole(fe.addr, (const __u8 *)&fe.port, c->id);
	}
	c->hits++;
	if (!whole)
		c->torn++;
	return 0;
}

SEC("tc")
int lb_probe_slots(struct __sk_buff *skb)
{
	struct lb_probe_ctx c = {};

	if (bpf_skb_load_bytes(skb, LB_ETH_HLEN, &c, 8))
		return -1;
	bpf_loop(LB_PROBE_READS, lb_probe_one, &c, 0);
	return (c.hits > 0xffff ? 0xffff : c.hits) << 16 | (c.torn > 0xffff ? 0xffff : c.torn);
}

#endif /* __LBSTATE_PROBE_H */
