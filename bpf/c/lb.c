// SPDX-License-Identifier: Apache-2.0
/*
 * The lbstate maps, declared with BTF so that loaders (lbstate's Go side,
 * bpftool, a datapath) see their key and value types. Sizes here are
 * defaults: the agent sets max_entries from its flags.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "lb.h"

/* Maglev table sizes up to 131071 slots; the agent sets the real size. */
#define LB_MAGLEV_MAX_TABLE 131071

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb_service_key);
	__type(value, struct lb_service_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} lb_services SEC(".maps");

/* lb.h: the writers of lb_services announce their writes in its one word. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
} lb_services_seq SEC(".maps");

/* A dense ID map: see lb_id_slot in lb.h. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_backend);
	__uint(max_entries, 65536);
} lb_backends SEC(".maps");

/* A dense ID map: see lb_id_slot in lb.h. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_rev_nat_value);
	__uint(max_entries, 65536);
} lb_rev_nat SEC(".maps");

struct lb_maglev_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32[LB_MAGLEV_MAX_TABLE]);
	__uint(max_entries, 1);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, 65536);
	__array(values, struct lb_maglev_inner);
} lb_maglev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb_affinity_key);
	__type(value, struct lb_affinity_value);
	__uint(max_entries, 65536);
} lb_affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lb_src_range_key);
	__type(value, __u8);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} lb_src_range SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 2);
} lb_id_marks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_flow_seed_value);
	__uint(max_entries, 1);
} lb_flow_seed SEC(".maps");

/* The reference datapath's own maps; the agent sets their sizes too. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb_ct_key);
	__type(value, struct lb_ct_value);
	__uint(max_entries, 131072);
} lb_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb_ct_key);
	__type(value, struct lb_ct_value);
	__uint(max_entries, 65536);
} lb_sock_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct lb_counter_key);
	__type(value, struct lb_counter_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} lb_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct lb_drop_key);
	__type(value, __u64);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} lb_drops SEC(".maps");

char __license[] SEC("license") = "Dual BSD/GPL";
