/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection outcomes, for passive failure accrual: the datapath reports
 * how each TCP connection it balanced to a backend began, and the agent
 * feeds the reports to the backend's breaker (reflectors/health). The
 * socket programs see it in sockops.h (a connect() that reaches
 * ESTABLISHED, or is refused, or times out); the tc programs in tc.h (the
 * backend's first answer to a SYN: a SYN-ACK or a RST; or the client's
 * SYN again, unanswered within its retransmission timeout).
 *
 * Reports go through a ring buffer that the datapath never waits on: a
 * report that finds it full is dropped and counted in lb_dp_conn_lost.
 * Both maps are the datapath's own (made with the programs, unpinned): a
 * restart loses only the reports not read yet. Nothing is reported
 * unless the loader sets lb_conn_reports.
 */
#ifndef __LBSTATE_CONN_H
#define __LBSTATE_CONN_H

/* lb_conn_event.result */
enum {
	LB_CONN_OK      = 0, /* the backend answered: SYN-ACK, ESTABLISHED */
	LB_CONN_REFUSED = 1, /* the backend answered the SYN with a RST */
	LB_CONN_TIMEOUT = 2, /* no answer within the client's retransmission timeout */
	LB_CONN_ERROR   = 3, /* the connect failed otherwise (an ICMP error) */
};

/* lb_conn_event.source */
enum {
	LB_CONN_SOCKET = 1, /* sockops.h */
	LB_CONN_TC     = 2, /* tc.h */
};

struct lb_conn_event {
	__u8   addr[16];   /* the backend, as in lb_backend */
	__be16 port;
	__u8   result;     /* LB_CONN_* */
	__u8   source;     /* LB_CONN_SOCKET or LB_CONN_TC */
	__u32  backend_id; /* tc: the flow's; socket: 0 (not looked up again) */
	__u32  rev_nat_id; /* likewise */
};

/* 8192 reports of 32 bytes (with the ring's header): about a second of a
 * busy node's new connections while the agent is not reading. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} lb_dp_conn_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} lb_dp_conn_lost SEC(".maps");

/* lb_conn_reports turns the reports on (the loader sets it): off, the
 * verifier prunes every branch that reports. */
volatile const __u32 lb_conn_reports;

/*
 * lb_report_conn reports e. A success wakes no reader: the agent reads
 * them with the next failure or on its own short interval, so that the
 * common case costs no wake-up.
 */
static __noinline void lb_report_conn(struct lb_conn_event *e)
{
	__u32 zero = 0;
	__u64 *lost;

	if (!bpf_ringbuf_output(&lb_dp_conn_events, e, sizeof(*e), e->result == LB_CONN_OK ? BPF_RB_NO_WAKEUP : 0))
		return;
	lost = bpf_map_lookup_elem(&lb_dp_conn_lost, &zero);
	if (lost)
		*lost += 1;
}

#ifndef SOL_TCP
#define SOL_TCP 6
#endif
#ifndef TCP_BPF_SOCK_OPS_CB_FLAGS
#define TCP_BPF_SOCK_OPS_CB_FLAGS 1008 /* Linux 6.10 */
#endif

/*
 * lb_conn_watch_connect asks, from connect4/6, for the state changes of
 * a TCP socket that socket LB balanced (sockops.h), so that lb_sock_ops
 * need not look the socket up again at its SYN. A kernel before 6.10
 * refuses the option: lb_sock_ops then looks it up (lb_sock_ct).
 */
static __always_inline void lb_conn_watch_connect(struct bpf_sock_addr *ctx)
{
	int flags = BPF_SOCK_OPS_STATE_CB_FLAG;

	bpf_setsockopt(ctx, SOL_TCP, TCP_BPF_SOCK_OPS_CB_FLAGS, &flags, sizeof(flags));
}

#endif /* __LBSTATE_CONN_H */
