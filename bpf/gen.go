package bpf

// The committed lb_bpfel.o and lb_bpfel.go are generated from c/lb.c and
// include/lb.h by bpf2go (clang needed only to regenerate them):
//
//	go generate ./bpf
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -no-strip -type lb_service_key -type lb_service_value -type lb_backend -type lb_rev_nat_value -type lb_affinity_key -type lb_affinity_value -type lb_src_range_key lb c/lb.c -- -I./include
