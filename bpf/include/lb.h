/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lbstate map ABI: the keys and values of the maps that lbstate's
 * reconciler writes and a datapath reads.
 *
 * One set of maps serves IPv4 and IPv6: every address is 16 bytes, IPv6 as
 * is and IPv4 as an IPv4-mapped IPv6 address (::ffff:a.b.c.d). Ports are in
 * network byte order, everything else in host byte order. IDs are 32 bits
 * so that more than 65535 frontends fit.
 */
#ifndef __LBSTATE_LB_H
#define __LBSTATE_LB_H

#include <linux/types.h>

/* Frontend types (lb_service_value.type). */
enum {
	LB_SVC_CLUSTER_IP     = 1,
	LB_SVC_NODE_PORT      = 2,
	LB_SVC_LOAD_BALANCER  = 3,
	LB_SVC_EXTERNAL_IP    = 4,
	LB_SVC_HOST_PORT      = 5,
	LB_SVC_LOCAL_REDIRECT = 6,
};

/* Frontend flags (lb_service_value.flags). */
enum {
	LB_F_EXT_LOCAL     = 1 << 0, /* external traffic policy Local */
	LB_F_INT_LOCAL     = 1 << 1, /* internal traffic policy Local */
	LB_F_AFFINITY      = 1 << 2, /* session affinity by client address */
	LB_F_SOURCE_RANGES = 1 << 3, /* clients must match lb_src_range */
	LB_F_REDIRECTED    = 1 << 4, /* backends come from a redirect */
	LB_F_PROXY         = 1 << 5, /* new flows go to the L7 proxy at proxy_port */
	LB_F_SKIP_FROM_BACKEND = 1 << 6, /* a client that is one of the redirect's
					  * backends takes a fallback slot */
};

/* Backend selection (lb_service_value.algorithm). */
enum {
	LB_ALG_RANDOM = 1, /* a random slot among 1..count */
	LB_ALG_MAGLEV = 2, /* lb_maglev[rev_nat_id][hash(flow) % M] */
};

/* Frontend scopes (lb_service_key.scope). */
enum {
	LB_SCOPE_EXTERNAL = 0,
	LB_SCOPE_INTERNAL = 1,
};

/* Backend states (lb_backend.state). */
enum {
	LB_BACKEND_ACTIVE      = 0,
	LB_BACKEND_TERMINATING = 1,
	LB_BACKEND_QUARANTINED = 2,
	LB_BACKEND_MAINTENANCE = 3,
	LB_BACKEND_NOT_READY   = 4, /* out of rotation (readiness), open flows go on */
};

/*
 * lb_services: one master entry (slot 0) per frontend, which holds the
 * backends of the first LB_INLINE_SLOTS slots, and one entry per backend
 * slot after those. Slots 1..count take new flows, each backend in proportion
 * to its weight; slots count+1..count+standby hold backends that only
 * carry the flows they already have (terminating, quarantined, drained).
 *
 * Overrides (see the README's Writer rules):
 * - LB_F_REDIRECTED: a redirect (a local redirect policy) chose the
 *   backends of slots 1..count+standby instead of the service's own.
 *   With LB_F_SKIP_FROM_BACKEND too (skipRedirectFromBackend), a client
 *   whose address is one of those backends' addresses is not redirected:
 *   its new flow takes a random one of the fallback slots
 *   count+standby+1..count+standby+fallback, which hold the service's
 *   own backends that take new flows, one slot each (the lb_backends
 *   entries are the ones the service has without the redirect, under the
 *   same IDs). No fallback slot (fallback 0): such a client is dropped as
 *   LB_DROP_NO_BACKEND, as any client of a service without backends.
 * - LB_F_PROXY: an L7 proxy on this node takes the new flows: they go to
 *   port proxy_port at the loopback address of the flow's family
 *   (127.0.0.1 or ::1) instead of to a slot's backend; the slots stay, for
 *   the proxy to balance over. It applies on top of the above. A flow to
 *   the proxy names backend ID 0 in conntrack.
 *
 * Rejected share: a slot among 1..count, or an element of the frontend's
 * Maglev table, may name LB_BACKEND_REJECT instead of a backend: a new
 * flow that lands on it is refused (a socket's connect() or sendmsg()
 * fails with ECONNREFUSED, a packet is dropped) and counted in lb_drops
 * as LB_DROP_REJECTED. The control plane writes such slots for the share
 * of a traffic split whose backend service does not resolve (the Gateway
 * API's rule for an invalid backendRef), in proportion to that share like
 * any backend's slots. No lb_backends entry has that ID; the ID
 * allocator never hands it out.
 */
#define LB_BACKEND_REJECT 0xffffffffU

/*
 * Inline slots. The master entry holds the backend IDs of slots
 * 1..LB_INLINE_SLOTS itself (lb_service_value.backends), so that a
 * frontend with at most that many slots is one hash entry, and a reader
 * sees its count and those IDs in one value. Only slots after them
 * have entries of their own (key.slot > LB_INLINE_SLOTS); lb_services
 * holds no entry for a slot 1..LB_INLINE_SLOTS. A power of two: the
 * datapath masks an inline index with it. Most Services have at most 16
 * endpoints; a master entry is 96 bytes of value instead of 24.
 */
#define LB_INLINE_SLOTS 16

struct lb_service_key {
	__u8   addr[16];
	__be16 port;
	__u16  slot;
	__u8   proto; /* IPPROTO_TCP, _UDP, _SCTP, or 0 for any */
	__u8   scope; /* LB_SCOPE_* */
	__u8   pad[2];
};

struct lb_service_value {
	__u32 backend_id;       /* slot > LB_INLINE_SLOTS: the backend in this slot */
	__u32 rev_nat_id;       /* the frontend's ID: key of lb_rev_nat, lb_maglev */
	__u32 affinity_timeout; /* master: session affinity in seconds */
	__u16 count;            /* master: slots taking new flows */
	__u16 standby;          /* master: slots after them, for existing flows */
	__u8  type;             /* master: LB_SVC_* */
	__u8  flags;            /* master: LB_F_* */
	__u8  algorithm;        /* master: LB_ALG_* */
	__u8  pad;
	__be16 proxy_port;      /* master, LB_F_PROXY: the L7 proxy's port */
	__u16 fallback;         /* master, LB_F_SKIP_FROM_BACKEND: fallback slots */
	/* master: the backends of slots 1..LB_INLINE_SLOTS (0 past the
	 * frontend's last slot); only slots after them have entries. */
	__u32 backends[LB_INLINE_SLOTS];
	/* master: the write's generation, a number no other write of the
	 * map carries (the agent counts its writes, bpf/services.go); 0 in
	 * a slot's entry. A reader that copies a master checks that it did
	 * not change (master.h, lb_read_master): the kernel may reuse a
	 * hash element freed by a rewrite or a delete at once, for any key. */
	__u64 gen;
};

/*
 * lb_services_seq (array, one __u64, mmapable; the control plane's own):
 * the writers of lb_services announce each mutation of it here, so that
 * a reader can tell a read that no write overlapped, and trust it after
 * one lookup. Every update, delete or batch of lb_services is bracketed:
 * before it, an atomic add of 1 (a write in flight, the low 32 bits);
 * after it, an atomic add of LB_SEQ_DONE - 1 (one write fewer in flight,
 * one more done, the high 32 bits). The word never takes a value twice
 * with no write in flight, so a reader that finds it equal, with none in
 * flight, before and after its lookup and copy saw no write (master.h,
 * lb_read_master); writers may be concurrent. A write of lb_services
 * without the bracket is not seen, and readers may then take a torn or
 * a missed read for a good one: every writer must bracket (bpf.Maps does;
 * an embedder's own writer takes the bracket from bpf.Maps.ServicesSeq).
 */
#define LB_SEQ_IN_FLIGHT 0xffffffffULL /* writes in flight */
#define LB_SEQ_DONE      (1ULL << 32)  /* one write done */

/*
 * lb_backends and lb_rev_nat are dense ID maps: arrays in which ID id
 * lives in slot lb_id_slot(id, max_entries) and its value repeats the ID
 * (0: an empty slot). The control plane never gives two live IDs one slot,
 * but an ID a flow still carries (in lb_ct, lb_sock_ct, lb_affinity) may
 * have been released and its slot given to a newer ID: a reader that finds
 * another ID in the slot treats its own as gone, as if the entry were
 * missing.
 */
static inline __attribute__((always_inline)) __u32
lb_id_slot(__u32 id, __u32 max_entries)
{
	return max_entries ? id % max_entries : 0;
}

/* lb_backends: backend ID -> backend, in slot lb_id_slot(ID). */
struct lb_backend {
	__u8   addr[16];
	__be16 port;
	__u8   proto;
	__u8   state; /* LB_BACKEND_* */
	__u32  cluster_id;
	__u8   zone;  /* zone ID from the agent's zone mapping, 0 if unknown */
	__u8   pad[3];
	__u32  id;    /* the backend ID; 0: the slot is empty */
};

/*
 * lb_rev_nat: rev_nat_id -> the frontend, to rewrite replies, in slot
 * lb_id_slot(rev_nat_id).
 */
struct lb_rev_nat_value {
	__u8   addr[16];
	__be16 port;
	/* The rest of the frontend's identity, which the datapath does not
	 * read: a restarted agent that finds only lb_rev_nat matches an entry
	 * to its frontend by all of it, so that TCP/UDP twins (or the two
	 * scopes of one) keep their own IDs. 0, 0 in entries of older agents. */
	__u8   proto;
	__u8   scope; /* 0: external, 1: internal */
	__u32  id;    /* the frontend ID (rev_nat_id); 0: the slot is empty */
};

/*
 * lb_maglev: rev_nat_id -> an inner array with one element, the whole
 * lookup table of M backend IDs, so that a table is replaced in one write.
 * A new flow takes the backend in slot lb_flow_hash(...) % M.
 */

/*
 * The flow hash: FNV-1a (32 bits) over 37 bytes, in this order: the
 * client's address (16 bytes, IPv4 mapped) and port (2 bytes, network
 * order), the frontend's address and port as in its lb_services key, and
 * the protocol byte of that key (0 for an any-protocol frontend). It is
 * keyed: it starts not from FNV's offset basis but from a basis the
 * node's secret seed gives (lb_flow_seed: FNV-1a of its 16 bytes from the
 * offset basis; the offset basis itself for an all-zero seed), so that a
 * client cannot craft tuples that land on a backend of its choice. The
 * loader reads the seed and sets the basis as a constant. Maglev takes
 * slot hash % M. bpf.FlowSeed.FlowHash in Go computes the same, which is
 * how lbctl explain predicts the datapath's choice; change both or
 * neither.
 */
#define LB_FNV1A_OFFSET 2166136261U
#define LB_FNV1A_PRIME  16777619U

static inline __attribute__((always_inline)) __u32
lb_fnv1a(__u32 h, const __u8 *p, int n)
{
#pragma unroll
	for (int i = 0; i < n; i++) {
		h ^= p[i];
		h *= LB_FNV1A_PRIME;
	}
	return h;
}

static inline __attribute__((always_inline)) __u32
lb_flow_hash(__u32 basis, const __u8 client[16], __be16 client_port, const __u8 frontend[16], __be16 frontend_port,
	     __u8 proto)
{
	__u32 h = basis;

	h = lb_fnv1a(h, client, 16);
	h = lb_fnv1a(h, (const __u8 *)&client_port, 2);
	h = lb_fnv1a(h, frontend, 16);
	h = lb_fnv1a(h, (const __u8 *)&frontend_port, 2);
	return lb_fnv1a(h, &proto, 1);
}

/*
 * lb_flow_seed (array, one entry, the control plane's own): the node's
 * flow hash seed, random, made once when the maps are created and kept
 * with them (pinned) across restarts, so that established Maglev
 * choices and lbctl explain's predictions hold.
 */
struct lb_flow_seed_value {
	__u8 key[16];
};

/*
 * lb_affinity (LRU, written by the datapath): client and frontend ->
 * backend. Socket load balancing, which does not know the client's
 * address at connect(), pins the client's network namespace: 8 zero bytes,
 * then the namespace's cookie (host order).
 *
 * A pin is honoured only while its backend takes new flows for the
 * frontend: it is active and sits in one of the slots 1..count (so not
 * weight 0, standby, hidden by a route or redirect, or only a fallback).
 * slot is where it sat when last checked, a hint that saves the search
 * of slots 1..count; 0 for none. A pin that fails the check is replaced
 * by the new flow's own choice.
 */
struct lb_affinity_key {
	__u8  client[16];
	__u32 rev_nat_id;
};

struct lb_affinity_value {
	__u32 backend_id;
	__u32 last_used; /* seconds, datapath clock */
	__u16 slot;      /* a hint: the slot that held backend_id, 0 for none */
	__u8  pad[2];
};

/*
 * lb_src_range (LPM trie): the client prefixes a frontend with
 * LB_F_SOURCE_RANGES admits. prefixlen counts rev_nat_id's 32 bits plus
 * the address prefix (an IPv4 /n is 96 + n bits of the mapped address).
 */
struct lb_src_range_key {
	__u32 prefixlen;
	__u32 rev_nat_id;
	__u8  addr[16];
};

/*
 * lb_id_marks (array, the control plane's own): per kind of ID (0:
 * frontend, 1: backend), an ID above every ID handed out, so that an
 * agent restarting does not hand out IDs that live flows may still carry.
 */
enum {
	LB_ID_MARK_FRONTEND = 0,
	LB_ID_MARK_BACKEND  = 1,
};

/*
 * The maps below are the reference datapath's (bpf/c/datapath.c): it
 * writes them, the control plane only reads them (metrics, lbctl top).
 */

/*
 * lb_ct (LRU): conntrack of packets. Most flows have one entry, keyed by
 * their client (below); the others two, keyed by a packet's 5-tuple as
 * the datapath sees it arrive: the client's packet to the frontend
 * (LB_CT_FORWARD: rewrite the destination to the backend) or the
 * backend's reply to the client (LB_CT_REPLY: rewrite the source to the
 * frontend, from lb_rev_nat); kind LB_CT_PACKET.
 *
 * The two entries of a flow live one lifetime: whichever direction a
 * packet goes, both get the same expiry and state (the datapath writes
 * the other entry at most once a second, when the expiry moves, and
 * recreates it if the LRU took it). A reply entry names, in peer and
 * peer_port, the address the client sent to (the forward entry's
 * destination), so that a reply finds the forward entry. A flow's expiry
 * is now plus a timeout that its state picks (lb_ct_timeout_* in
 * select.h, set by the loader): TCP before the first reply (SYN only),
 * TCP after it, TCP once a FIN or RST was seen (LB_CT_F_CLOSING), and
 * anything else. The agent's garbage collector deletes expired entries.
 *
 * A TCP flow that never got going (refused: LB_CT_F_REFUSED; or no reply
 * yet) leaves no TIME_WAIT behind at the client, which may send a new
 * SYN from the same port while the entries live: that SYN is balanced
 * anew, as a new flow, so that it does not follow the old one to a
 * backend taken out of rotation since. A forward entry of TCP keeps, in
 * peer's first 4 bytes (network order), the sequence number of the
 * flow's first packet: the client's SYN again (a retransmission, same
 * number) is not a new connection. An established flow keeps its
 * backend for a new SYN, as the client's TIME_WAIT rules apply.
 *
 * Two flows whose replies would look the same (one client address and
 * port, one backend, reached through two frontends) cannot both be
 * translated: the backend cannot tell them apart. A new flow whose reply
 * entry a live flow of another frontend holds tries another backend once
 * (a random slot), then is dropped as LB_DROP_CT_COLLISION; the first
 * flow's entries are not overwritten, unless that flow is closed both
 * ways (each side's FIN, or a RST, seen) and the new packet is a SYN alone: a client reuses its
 * port towards another destination once its connection closed, and the
 * new connection takes the closing flow's place (tc.h, lb_ct_yields).
 *
 * lb_sock_ct (LRU): the same for sockets, in a map of its own so that
 * sockets, which leave their entries behind when they close, do not push
 * live flows out of lb_ct. Keyed by a socket's cookie (8 bytes, host
 * order, at the start of src) and the address the socket talks to (dst,
 * dport, proto): the frontend (LB_CT_FORWARD: the backend an unconnected
 * UDP socket sends to) or the backend (LB_CT_REPLY: what recvmsg and
 * getpeername show instead); kind LB_CT_SOCKET. Their expiry is the TCP
 * (after the first reply) or other timeout from their last use; the
 * agent's collector leaves them alone, as a connected socket's entry is
 * written only at connect() and getpeername needs it while it lasts. The
 * socket's close deletes that entry (lb_sock_release), so that closed
 * sockets never make the LRU evict a live one's; an unconnected UDP
 * socket's entries are left to the LRU.
 */
enum {
	LB_CT_PACKET = 0,
	LB_CT_SOCKET = 1,
	LB_CT_CLIENT = 2,
};

enum {
	LB_CT_FORWARD = 0,
	LB_CT_REPLY   = 1,
	LB_CT_FLOW    = 2,
};

/*
 * One entry per flow (kind LB_CT_CLIENT, dir LB_CT_FLOW): the only part
 * of a flow's tuple that both directions know is the client's address,
 * port and protocol (the source of its packets, the destination of the
 * replies), so the key is those alone (src, sport, proto; dst and dport
 * zero). The entry names the frontend (rev_nat_id) and the backend
 * (backend_id), and each direction checks its own side: a reply is the
 * flow's if its source is the backend's lb_backends address and port; a
 * client's packet if its destination is the address and port the client
 * sent to, which an IPv4 flow's entry holds in peer[8..16] and peer_port
 * (an IPv6 flow's, with peer_port 0, is its frontend's lb_rev_nat
 * address and port). Anything else with the same client is another
 * flow. peer's first 4 bytes keep a TCP flow's first sequence number, as
 * a forward entry's do. Its state and expiry serve both directions.
 *
 * A new flow takes one entry so, instead of a forward and a reply entry,
 * unless its backend is the L7 proxy (backend ID 0), it is an IPv6 flow
 * to a NodePort on the any-address (the lb_rev_nat address cannot check
 * its packets), or the client's key is held by a live flow to another
 * frontend (a client port shared between flows: an unconnected UDP
 * socket talking to two services); then it takes the two entries above.
 * Those are looked for only where the client's key holds an entry or
 * the client's port is one of a flow with two entries (the datapath's
 * own lb_dp_ct_pair_ports, bpf/c/ct.h, which no eviction empties), and a
 * packet is looked up as a reply only if some flow's client used its
 * destination port (lb_dp_ct_ports): so a new flow costs one lookup that
 * misses and one insert. A flow with two entries keeps its client's key
 * held, by the flow that held it (the collector keeps that entry,
 * expired, while flows with two entries of the client live) or by a
 * marker (an entry with rev_nat_id 0 that is already dead: it matches no
 * packet), written when nothing held the key (by the datapath, or by the
 * collector for entries of an older datapath, which had no client
 * entries; loading the datapath runs it); the LRU may take that entry,
 * the port stays.
 * The reply-collision rule covers both kinds: a new flow whose backend's
 * replies another live flow of that client port would claim (a flow's
 * one entry naming that backend, or a reply entry of that backend and
 * client) tries another backend once, then is dropped; a free client key
 * says there is none.
 */

/* lb_ct_value.flags */
enum {
	LB_CT_F_REPLIED = 1 << 0, /* a reply was seen: the TCP handshake got an answer */
	LB_CT_F_CLOSING = 1 << 1, /* a FIN or RST was seen */
	LB_CT_F_UNANSWERED = 1 << 2, /* the client sent its SYN again before any reply
				      * (reported as a connect timeout, see bpf/c/conn.h) */
	LB_CT_F_REFUSED = 1 << 3, /* the backend's first reply was a RST */
	/* Each side's close (its FIN, or either side's RST): a flow closed
	 * both ways is over, one closed one way still carries the other
	 * side's data, and keeps its entries (tc.h, lb_ct_yields). */
	LB_CT_F_CLIENT_CLOSED = 1 << 4,
	LB_CT_F_BACKEND_CLOSED = 1 << 5,
};

/* Default timeouts in seconds; the loader sets the ones in force. */
#define LB_CT_TIMEOUT_SYN   60
#define LB_CT_TIMEOUT_TCP   21600
#define LB_CT_TIMEOUT_CLOSE 10
#define LB_CT_TIMEOUT_OTHER 120

struct lb_ct_key {
	__u8   src[16];
	__u8   dst[16];
	__be16 sport;
	__be16 dport;
	__u8   proto;
	__u8   kind; /* LB_CT_PACKET or LB_CT_SOCKET */
	__u8   pad[2];
};

struct lb_ct_value {
	__u32  backend_id;
	__u32  rev_nat_id;
	__u32  expires;   /* seconds, datapath clock: dead after this */
	__u8   dir;       /* LB_CT_FORWARD or LB_CT_REPLY */
	__u8   flags;     /* LB_CT_F_* */
	__be16 peer_port; /* LB_CT_REPLY: the port the client sent to */
	__u8   peer[16];  /* LB_CT_REPLY: the address the client sent to */
};

/*
 * lb_counters (per-CPU hash): traffic per frontend and backend, as the
 * datapath saw it. flows counts backend selections (new flows, and each
 * socket connect); packets and bytes count both directions at tc (bytes
 * from the L2 header on) and datagrams sent through socket LB (no bytes).
 */
struct lb_counter_key {
	__u32 rev_nat_id;
	__u32 backend_id;
};

struct lb_counter_value {
	__u64 flows;
	__u64 packets;
	__u64 bytes;
};

/* lb_drops (per-CPU hash): (rev_nat_id, reason) -> packets dropped. */
enum {
	LB_DROP_NO_BACKEND    = 1, /* no slot takes new flows (count 0) */
	LB_DROP_SOURCE_RANGE  = 2, /* the client is outside lb_src_range */
	LB_DROP_MISSING_ENTRY = 3, /* a slot, backend or Maglev table the master implies is missing */
	LB_DROP_UNSUPPORTED   = 4, /* the backend is of another IP family */
	LB_DROP_REWRITE       = 5, /* rewriting the packet failed */
	LB_DROP_REJECTED      = 6, /* the flow landed on a reject slot (LB_BACKEND_REJECT) */
	LB_DROP_CT_COLLISION  = 7, /* its replies would be another live flow's (lb_ct) */
	LB_DROP_FRAG_NO_FIRST = 8, /* a later fragment before its first one, or forgotten (rev_nat_id 0) */
	LB_DROP_ICMP          = 9, /* an ICMP error about a balanced flow that could not be translated */
	LB_DROP_TORN_MASTER   = 10, /* the master entry changed under every read of it (rev_nat_id 0) */
};

struct lb_drop_key {
	__u32 rev_nat_id;
	__u32 reason; /* LB_DROP_* */
};

#endif /* __LBSTATE_LB_H */
