/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For BenchmarkDatapath only; the loader never attaches these.
 * BPF_PROG_TEST_RUN with repeat runs a program again and again on one
 * packet, which the first run rewrites. These run lb_tc_ingress on the
 * packet as it was given, each time: they save its headers and put them
 * back after. lb_bench_new gives every run a new client address, so that
 * every run is a new flow; lb_bench_copy only saves and restores, for the
 * benchmark to subtract.
 */
#ifndef __LBSTATE_BENCH_H
#define __LBSTATE_BENCH_H

#define LB_BENCH_HDR 80 /* Ethernet + IPv6 + TCP, rounded up: packets must be longer */

__u32 lb_bench_seq; /* racy across CPUs; the benchmark runs on one */
/* The saved headers: a global, not the stack, which lb_tc and its
 * subprograms need all of (the verifier limits the sum to 512 bytes). */
__u8 lb_bench_saved[LB_BENCH_HDR];

static __always_inline int lb_bench(struct __sk_buff *skb, bool new_flows, bool run)
{
	__u8 *saved = lb_bench_saved;
	__u32 seq;
	int ret = TC_ACT_OK;

	if (bpf_skb_load_bytes(skb, 0, saved, LB_BENCH_HDR))
		return TC_ACT_SHOT;
	if (new_flows) {
		/* A new client: the last 4 bytes of the source address. */
		seq = lb_bench_seq++;
		if (bpf_skb_store_bytes(skb, saved[12] == 0x08 ? LB_ETH_HLEN + 12 : LB_ETH_HLEN + 8 + 12, &seq, 4, 0))
			return TC_ACT_SHOT;
	}
	if (run)
		ret = lb_tc(skb, true, false);
	if (bpf_skb_store_bytes(skb, 0, saved, LB_BENCH_HDR, 0))
		return TC_ACT_SHOT;
	return ret;
}

SEC("tc")
int lb_bench_est(struct __sk_buff *skb) { return lb_bench(skb, false, true); }

SEC("tc")
int lb_bench_new(struct __sk_buff *skb) { return lb_bench(skb, true, true); }

SEC("tc")
int lb_bench_copy(struct __sk_buff *skb) { return lb_bench(skb, false, false); }

SEC("tc")
int lb_bench_copy_new(struct __sk_buff *skb) { return lb_bench(skb, true, false); }

#endif /* __LBSTATE_BENCH_H */
