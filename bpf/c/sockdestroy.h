/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connected UDP sockets whose backend is gone. Socket load balancing
 * translates a UDP socket once, at connect(): the socket then sends to
 * its backend's address itself, and no program sees its datagrams as
 * addressed to the frontend again. When the backend leaves lb_backends,
 * such a socket would send to it forever; lb_sock_destroy_udp, a UDP
 * socket iterator, destroys it (bpf_sock_destroy, Linux 6.5), so that the
 * application sees ECONNABORTED and connects anew, to a live backend
 * (Cilium does the same). A socket is ours if lb_sock_ct holds the reply
 * entry connect() wrote for it (by its cookie and peer); its backend is
 * gone if that entry's backend ID no longer reads back from lb_backends.
 * A socket sent to the L7 proxy of a proxy-redirected frontend names
 * backend ID 0, which never reads back: it is an orphan once its
 * frontend's master entry no longer sends to that proxy (the redirect
 * was removed, or its port changed, or the frontend went), read through
 * lb_rev_nat, as connect() found it (lb_lookup_frontend).
 * Each destroyed socket writes one byte to the iterator's output, which
 * the agent counts.
 *
 * Kernel types, read through CO-RE: only the fields used.
 */
#ifndef __LBSTATE_SOCKDESTROY_H
#define __LBSTATE_SOCKDESTROY_H

struct sock_common {
	union {
		struct {
			__be32 skc_daddr;
			__be32 skc_rcv_saddr;
		};
	};
	union {
		struct {
			__be16 skc_dport;
			__u16 skc_num;
		};
	};
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	int sk_err; /* sockops.h */
} __attribute__((preserve_access_index));

struct udp_sock;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/*
 * lb_proxy_socket_orphaned says whether a socket connected to the L7
 * proxy at port (ct: its lb_sock_ct reply entry) lost its redirect: its
 * frontend's master entry is gone, is another frontend's, or sends
 * elsewhere than port.
 */
static __always_inline bool lb_proxy_socket_orphaned(const struct lb_ct_value *ct, __be16 port)
{
	struct lb_service_key key = { .proto = IPPROTO_UDP };
	struct lb_service_value m;
	struct lb_rev_nat_value fe;
	int r;

	if (!lb_rev_nat_lookup(ct->rev_nat_id, &fe))
		return true;
	__builtin_memcpy(key.addr, fe.addr, 16);
	key.port = fe.port;
	r = lb_lookup_frontend(&key, true, &m);
	if (r == LB_MASTER_TORN)
		return false; /* being rewritten: the next collection looks again */
	if (r != LB_MASTER_FOUND || m.rev_nat_id != ct->rev_nat_id || !(m.flags & LB_F_PROXY))
		return true;
	return m.proxy_port != port; /* the proxy's address is the loopback's (lb_proxy_backend) */
}

#define LB_TCP_ESTABLISHED 1 /* a connected UDP socket's state */

SEC("iter/udp")
int lb_sock_destroy_udp(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	struct lb_ct_key k = {};
	struct lb_ct_value *ct;
	struct lb_backend be;
	__u64 cookie;
	__u8 one = 1;

	if (!sk || sk->__sk_common.skc_state != LB_TCP_ESTABLISHED)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	__builtin_memcpy(k.src, &cookie, sizeof(cookie));
	if (sk->__sk_common.skc_family == AF_INET) {
		k.dst[10] = k.dst[11] = 0xff;
		*(__be32 *)&k.dst[12] = sk->__sk_common.skc_daddr;
	} else if (sk->__sk_common.skc_family == AF_INET6) {
		BPF_CORE_READ_INTO(&k.dst, &sk->__sk_common, skc_v6_daddr);
	} else {
		return 0;
	}
	k.dport = sk->__sk_common.skc_dport;
	k.proto = IPPROTO_UDP;
	k.kind = LB_CT_SOCKET;
	ct = bpf_map_lookup_elem(&lb_sock_ct, &k);
	if (!ct || ct->dir != LB_CT_REPLY)
		return 0;
	if (ct->backend_id == 0 ? !lb_proxy_socket_orphaned(ct, k.dport)
				: lb_backend_lookup(ct->backend_id, &be))
		return 0;
	if (bpf_sock_destroy((struct sock_common *)sk) == 0) {
		/* A destroyed socket is disconnected: lb_sock_release would not
		 * find its entry when it is closed. */
		bpf_map_delete_elem(&lb_sock_ct, &k);
		bpf_seq_write(ctx->meta->seq, &one, 1);
	}
	return 0;
}

#endif /* __LBSTATE_SOCKDESTROY_H */
