package bpf

// The committed lb_bpfel.* and datapath_bpfel.* are generated from c/*.c
// and include/lb.h by bpf2go (clang needed only to regenerate them):
//
//	go generate ./bpf
//
// lb is the maps alone, whose BTF the ABI tests check the Go structs
// against; datapath is the reference datapath, with the same maps.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -no-strip -type lb_service_key -type lb_service_value -type lb_backend -type lb_rev_nat_value -type lb_affinity_key -type lb_affinity_value -type lb_src_range_key -type lb_ct_key -type lb_ct_value -type lb_counter_key -type lb_counter_value -type lb_drop_key -type lb_flow_seed_value lb c/lb.c -- -I./include
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -cflags "-O2 -mcpu=v3 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -no-strip datapath c/datapath.c -- -I./include
