package bpf

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Datapath is lbstate's reference datapath (c/datapath.c) loaded over an
// agent's kernel maps: programs that balance connections of local sockets
// (cgroup hooks) and packets arriving on interfaces (tc), keep flows on
// their backends in lb_ct, and count traffic in lb_counters and lb_drops.
// Loading attaches nothing; AttachCgroup and AttachTC do, and Close
// detaches everything it attached.
type Datapath struct {
	progs map[string]*ebpf.Program
	links []link.Link
	conn  connMaps // connreports.go
	ports *ctPorts // ctports.go: shared by the datapaths over one lb_ct
}

// The programs, by the names c/datapath.c gives them.
var (
	socketPrograms = []struct {
		name   string
		attach ebpf.AttachType
	}{
		{"lb_connect4", ebpf.AttachCGroupInet4Connect},
		{"lb_connect6", ebpf.AttachCGroupInet6Connect},
		{"lb_sendmsg4", ebpf.AttachCGroupUDP4Sendmsg},
		{"lb_sendmsg6", ebpf.AttachCGroupUDP6Sendmsg},
		{"lb_recvmsg4", ebpf.AttachCGroupUDP4Recvmsg},
		{"lb_recvmsg6", ebpf.AttachCGroupUDP6Recvmsg},
		{"lb_getpeername4", ebpf.AttachCgroupInet4GetPeername},
		{"lb_getpeername6", ebpf.AttachCgroupInet6GetPeername},
		{"lb_sock_release", ebpf.AttachCgroupInetSockRelease},
	}
	tcPrograms = []string{"lb_tc_ingress", "lb_tc_workload", "lb_tc_egress"}
	// udpReaperProgram is the UDP socket iterator of c/sockdestroy.h.
	udpReaperProgram = "lb_sock_destroy_udp"
)

// LoadDatapath loads the reference datapath's programs over m, which must
// be kernel maps (NewKernelMaps): the programs read the maps the
// reconciler writes and write lb_ct, lb_affinity, lb_counters and
// lb_drops.
func LoadDatapath(m *Maps) (*Datapath, error) {
	return LoadDatapathOptions(m, DefaultDatapathOptions)
}

// DatapathOptions are the reference datapath's settings beside its maps.
type DatapathOptions struct {
	CTTimeouts CTTimeouts
	// ConnectionReports has the programs report how the TCP connections
	// they balance begin (ConnectionReports in connreports.go), and
	// AttachCgroup attach lb_sock_ops, which sees it for sockets.
	ConnectionReports bool

	// masterRechecks, for tests (export_test.go), fails the first this
	// many tries of every guarded read of a master (master.h,
	// lb_read_master); with writeOverlaps, every read takes a write for
	// overlapping it, and reads guarded.
	masterRechecks uint32
	writeOverlaps  bool
	// writeDuringRead, for tests: a write is done between every
	// one-lookup read's copy and its second read of lb_services_seq.
	writeDuringRead bool
}

// DefaultDatapathOptions are LoadDatapath's.
var DefaultDatapathOptions = DatapathOptions{CTTimeouts: DefaultCTTimeouts}

// LoadDatapathOptions is LoadDatapath with opts.
func LoadDatapathOptions(m *Maps, opts DatapathOptions) (*Datapath, error) {
	names := append([]string(nil), tcPrograms...)
	names = append(names, udpReaperProgram, sockOpsProgram)
	for _, p := range socketPrograms {
		names = append(names, p.name)
	}
	return loadDatapathPrograms(m, opts, names...)
}

// loadDatapathPrograms loads the named programs of c/datapath.c over m.
func loadDatapathPrograms(m *Maps, opts DatapathOptions, names ...string) (*Datapath, error) {
	timeouts, err := opts.CTTimeouts.constants()
	if err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	spec, err := loadDatapath()
	if err != nil {
		return nil, err
	}
	replacements, err := m.kernelMaps()
	if err != nil {
		return nil, err
	}
	for name, ms := range spec.Maps {
		em, ok := replacements[name]
		if !ok {
			if ms.Type == ebpf.Array && (name == ".rodata" || name == ".bss" || name == ".data") {
				continue // the program's own globals
			}
			if strings.HasPrefix(name, "lb_dp_") {
				continue // the datapath's own state, made with the programs (lb_dp_frags)
			}
			return nil, fmt.Errorf("datapath: map %s is not among the agent's maps", name)
		}
		// The agent sized its maps from its flags; the object has defaults.
		ms.MaxEntries = em.MaxEntries()
		if ms.InnerMap != nil {
			ms.InnerMap.ValueSize = uint32(4 * m.Maglev.TableSize())
		}
	}
	// The constants the programs need to read the maps, from the maps
	// they will read: a dense ID's slot depends on its map's max_entries.
	seed, err := m.Seed()
	if err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	constants := map[string]uint32{
		"lb_flow_hash_basis":   seed.Basis(),
		"lb_maglev_table_size": uint32(m.Maglev.TableSize()),
		"lb_backends_max":      replacements[lbMapLbBackends].MaxEntries(),
		"lb_rev_nat_max":       replacements[lbMapLbRevNat].MaxEntries(),
	}
	for name, v := range timeouts {
		constants[name] = v
	}
	if opts.ConnectionReports {
		constants["lb_conn_reports"] = 1
	}
	if opts.masterRechecks > 0 {
		constants["lb_fault_master_rechecks"] = opts.masterRechecks
	}
	if opts.writeOverlaps {
		constants["lb_fault_write_overlaps"] = 1
	}
	if opts.writeDuringRead {
		constants["lb_fault_write_during_read"] = 1
	}
	if weakMemoryOrder {
		constants["lb_weak_memory_order"] = 1
	}
	if constants["lb_l4_csum_ipv6"], err = l4CsumIPv6Flag(); err != nil {
		return nil, fmt.Errorf("datapath: %w", err)
	}
	for name, v := range constants {
		vs := spec.Variables[name]
		if vs == nil {
			return nil, fmt.Errorf("datapath: the programs have no constant %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("datapath: %s: %w", name, err)
		}
	}
	wanted := map[string]bool{}
	for _, n := range names {
		if spec.Programs[n] == nil {
			return nil, fmt.Errorf("datapath: no program %s", n)
		}
		wanted[n] = true
	}
	for n := range spec.Programs {
		if !wanted[n] {
			delete(spec.Programs, n)
		}
	}
	// A datapath loaded over an lb_ct that others of this process use
	// shares their client port arrays (ctports.go).
	datapathLoads.Lock()
	defer datapathLoads.Unlock()
	ports := holdCTPorts(replacements[lbMapLbCt])
	if ports != nil {
		replacements[ctPortsMap], replacements[ctPairPortsMap] = ports.clients, ports.pairs
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: replacements})
	if err != nil {
		ports.release()
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("datapath: loading programs: %+v", verr)
		}
		return nil, fmt.Errorf("datapath: loading programs: %w", err)
	}
	d := &Datapath{progs: coll.Programs, ports: ports}
	d.conn.take(coll.Maps, opts.ConnectionReports)
	if d.ports == nil {
		if d.ports, err = newCTPorts(replacements[lbMapLbCt], coll.Maps); err != nil {
			coll.Close()
			d.Close()
			return nil, fmt.Errorf("datapath: %w", err)
		}
	}
	// The programs hold their own references to the maps (clones of the
	// agent's, and their globals).
	for _, em := range coll.Maps {
		em.Close()
	}
	// Flows that an older datapath wrote into a pinned lb_ct have two
	// entries and no marker under their client's key, which these
	// programs look for first: MarkConntrack writes the markers (and
	// the client ports of lb_ct's flows, which the programs, new, know
	// none of).
	if m.Conntrack != nil {
		if _, err := MarkConntrack(m, m.Conntrack); err != nil {
			d.Close()
			return nil, fmt.Errorf("datapath: %w", err)
		}
	}
	return d, nil
}

// weakMemoryOrder says whether the CPU may reorder loads, which the
// datapath's reads of lb_services_seq then fence (master.h); x86 does not.
// A variable, for tests of the fenced reads.
var weakMemoryOrder = runtime.GOARCH != "amd64" && runtime.GOARCH != "386"

// kernelMaps returns the kernel maps behind m, by name.
func (m *Maps) kernelMaps() (map[string]*ebpf.Map, error) {
	type kernelBacked interface {
		Name() string
		ebpfMap() *ebpf.Map
	}
	out := map[string]*ebpf.Map{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanInterface() || f.Kind() != reflect.Interface || f.IsNil() {
			continue
		}
		if kb, ok := f.Interface().(kernelBacked); ok && kb.ebpfMap() != nil {
			out[kb.Name()] = kb.ebpfMap()
		} else {
			return nil, fmt.Errorf("datapath: %s maps: the datapath needs kernel maps (--lb-maps kernel)", m.Kind)
		}
	}
	return out, nil
}

func (m *kernelMap[K, V]) ebpfMap() *ebpf.Map { return m.m }
func (m *kernelMaglev) ebpfMap() *ebpf.Map    { return m.outer }

// Program returns a loaded program by its name in c/datapath.c, nil if it
// is not loaded; for tests and embedders that attach it themselves.
func (d *Datapath) Program(name string) *ebpf.Program { return d.progs[name] }

// ProgramNames returns the names of the loaded programs.
func (d *Datapath) ProgramNames() []string {
	names := make([]string, 0, len(d.progs))
	for n := range d.progs {
		names = append(names, n)
	}
	return names
}

// AttachCgroup attaches the socket programs to the cgroup (v2) at path:
// connect(), sendmsg(), recvmsg(), getpeername() and the close of the
// sockets of its processes and their descendants' (lb_sock_release, which
// deletes a closed socket's lb_sock_ct entry: an embedder attaching the
// programs itself attaches it too); with ConnectionReports, lb_sock_ops
// too.
func (d *Datapath) AttachCgroup(path string) error {
	for _, p := range socketPrograms {
		if d.progs[p.name] == nil {
			return fmt.Errorf("datapath: %s is not loaded", p.name)
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: path, Attach: p.attach, Program: d.progs[p.name]})
		if err != nil {
			return fmt.Errorf("datapath: attaching %s to cgroup %s: %w", p.name, path, err)
		}
		d.links = append(d.links, l)
	}
	return d.attachSockOps(path)
}

// AttachTC attaches the tc programs (with tcx, Linux 6.6 and later) to the
// interface with index ifindex in the calling thread's network
// namespace: lb_tc_ingress on ingress, or lb_tc_workload for an interface
// whose traffic comes from local workloads (they use frontends' internal
// scope), and lb_tc_egress on egress.
func (d *Datapath) AttachTC(ifindex int, workload bool) error {
	ingress := "lb_tc_ingress"
	if workload {
		ingress = "lb_tc_workload"
	}
	for _, a := range []struct {
		name   string
		attach ebpf.AttachType
	}{{ingress, ebpf.AttachTCXIngress}, {"lb_tc_egress", ebpf.AttachTCXEgress}} {
		if d.progs[a.name] == nil {
			return fmt.Errorf("datapath: %s is not loaded", a.name)
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: d.progs[a.name], Attach: a.attach})
		if err != nil {
			return fmt.Errorf("datapath: attaching %s to interface %d: %w", a.name, ifindex, err)
		}
		d.links = append(d.links, l)
	}
	return nil
}

// Close detaches every program it attached and unloads them. The maps
// stay.
func (d *Datapath) Close() error {
	var errs []error
	for i := len(d.links) - 1; i >= 0; i-- {
		errs = append(errs, d.links[i].Close())
	}
	d.links = nil
	for _, p := range d.progs {
		errs = append(errs, p.Close())
	}
	d.progs = nil
	errs = append(errs, d.conn.close())
	errs = append(errs, d.ports.release())
	d.ports = nil
	return errors.Join(errs...)
}
