// SPDX-License-Identifier: Apache-2.0
/*
 * lbstate's reference datapath: programs that read the maps of lb.h as
 * the README's "What a datapath does with them" says. tc.h balances
 * packets arriving on interfaces, sock.h connections of local sockets;
 * select.h is what they share. The maps are lb.c's: the loader replaces
 * them with the agent's pinned maps.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stdbool.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "lb.c"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#ifndef IP_MF
#define IP_MF 0x2000
#endif
#ifndef IP_OFFSET
#define IP_OFFSET 0x1fff
#endif

#include "select.h"
#include "conn.h"
#include "tc.h"
#include "sock.h"
#include "sockdestroy.h"
#include "sockops.h"
#include "bench.h"
#include "probe.h"
