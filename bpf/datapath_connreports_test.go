package bpf_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// reports reads the connection reports waiting, after waiting for one
// at most wait.
func reports(t testing.TB, r *bpf.ConnReader, wait time.Duration) []bpf.ConnEvent {
	t.Helper()
	events, err := r.Read(nil, time.Now().Add(wait))
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func connReader(t testing.TB, h *dpHarness) *bpf.ConnReader {
	t.Helper()
	r, err := h.dp.ConnectionReports()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// The tc programs report how each balanced TCP flow began, once: the
// backend's SYN-ACK as a success, its RST as a refusal, and the client's
// SYN sent again before any answer as a timeout (not again for the SYNs
// after it, and a late SYN-ACK still reports the success); nothing for
// packets of a flow after its first answer, nor for UDP.
func TestTCReportsHowEachBalancedConnectionBegan(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts, ConnectionReports: true})
	r := connReader(t, h)
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.1:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.1:53/UDP", id: 2, slots: []uint32{2}})
	backend := lb.MustParseL3n4Addr("10.1.0.1:8080/TCP")
	ev := func(res bpf.ConnResult) bpf.ConnEvent {
		return bpf.ConnEvent{Backend: backend, Result: res, Source: bpf.ConnTC, BackendID: 1, RevNatID: 1}
	}

	accepted := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	_, out := h.sendTCP("lb_tc_ingress", accepted, "S")
	h.sendTCP("lb_tc_egress", out.Reply(), "SA")
	h.sendTCP("lb_tc_ingress", accepted, "A")
	h.sendTCP("lb_tc_egress", out.Reply(), "A")
	h.sendTCP("lb_tc_egress", out.Reply(), "R") // a reset later is no refusal

	refused := flow("10.0.0.5:40001", "10.96.0.1:80", lb.ProtoTCP)
	_, out = h.sendTCP("lb_tc_ingress", refused, "S")
	h.sendTCP("lb_tc_egress", out.Reply(), "RA")

	unanswered := flow("10.0.0.5:40002", "10.96.0.1:80", lb.ProtoTCP)
	_, out = h.sendTCP("lb_tc_ingress", unanswered, "S")
	h.sendTCP("lb_tc_ingress", unanswered, "S")
	h.sendTCP("lb_tc_ingress", unanswered, "S")
	h.expectCT("after three SYNs", unanswered, out.Reply(), bpf.CTFlagUnanswered, testTimeouts.SYN)
	h.sendTCP("lb_tc_egress", out.Reply(), "SA") // late

	h.send("lb_tc_ingress", flow("10.0.0.5:40003", "10.96.0.1:53", lb.ProtoUDP))

	want := []bpf.ConnEvent{ev(bpf.ConnOK), ev(bpf.ConnRefused), ev(bpf.ConnTimeout), ev(bpf.ConnOK)}
	var got []bpf.ConnEvent
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		got = append(got, reports(t, r, 100*time.Millisecond)...)
	}
	got = append(got, reports(t, r, 50*time.Millisecond)...) // and nothing more
	if !slices.Equal(got, want) {
		t.Errorf("reports:\n got %+v\nwant %+v", got, want)
	}
	if lost, err := r.Lost(); err != nil || lost != 0 {
		t.Errorf("lost %d reports (%v)", lost, err)
	}
}

// Without ConnectionReports nothing is reported, and no reader opens.
func TestTCReportsNothingUnlessAsked(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts})
	if _, err := h.dp.ConnectionReports(); err == nil {
		t.Fatal("a reader opened on a datapath loaded without reports")
	}
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	f := flow("10.0.0.5:40002", "10.96.0.1:80", lb.ProtoTCP)
	_, out := h.sendTCP("lb_tc_ingress", f, "S")
	h.sendTCP("lb_tc_ingress", f, "S")
	h.expectCT("after two SYNs", f, out.Reply(), 0, testTimeouts.SYN)
}

// The Go decoder reads struct lb_conn_event as the object's BTF lays it
// out.
func TestConnEventMatchesTheCStruct(t *testing.T) {
	spec, err := btf.LoadSpec("datapath_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	var s *btf.Struct
	if err := spec.TypeByName("lb_conn_event", &s); err != nil {
		t.Fatal(err)
	}
	offsets := map[string]uint32{}
	for _, m := range s.Members {
		offsets[m.Name] = m.Offset.Bytes()
	}
	want := map[string]uint32{"addr": 0, "port": 16, "result": 18, "source": 19, "backend_id": 20, "rev_nat_id": 24}
	if s.Size != bpf.ConnEventSize || !maps.Equal(offsets, want) {
		t.Errorf("struct lb_conn_event: size %d, offsets %v; the decoder reads size %d, offsets %v", s.Size, offsets, bpf.ConnEventSize, want)
	}
}

// lb_sock_ops reports how each connect() socket LB translated ended:
// ESTABLISHED as a success, a RST as a refusal, IPv4 and IPv6, once per
// connection; a connect() to a backend's address directly (not through
// a frontend) is not reported.
func TestSockOpsReportsHowEachBalancedConnectEnded(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: bpf.DefaultCTTimeouts, ConnectionReports: true})
	r := connReader(t, h)
	ns, cg := bpftest.NewNetns(t), bpftest.Cgroup(t)
	for _, a := range []string{"10.1.0.1/32", "10.1.0.2/32", "fd00:1::1/128"} {
		ns.AddAddr(t, a)
	}
	bpftest.ServeName(t, ns, "10.1.0.1", 8080, "b1")
	bpftest.ServeName(t, ns, "fd00:1::1", 8080, "b1")
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive) // nobody listens
	h.backend(3, "[fd00:1::1]:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.11:80/TCP", id: 2, slots: []uint32{2}})
	h.frontend(testFrontend{addr: "[fd00:96::10]:80/TCP", id: 3, slots: []uint32{3}})
	if err := h.dp.AttachCgroup(cg); err != nil {
		t.Fatal(err)
	}
	bpftest.RunClient(t, cg, ns, "tcp 10.96.0.10:80 2", "tcp 10.96.0.11:80 1", "tcp [fd00:96::10]:80 1", "tcp 10.1.0.1:8080 1")
	ev := func(addr string, res bpf.ConnResult) bpf.ConnEvent {
		return bpf.ConnEvent{Backend: lb.MustParseL3n4Addr(addr), Result: res, Source: bpf.ConnSocket}
	}
	want := []bpf.ConnEvent{ev("10.1.0.1:8080/TCP", bpf.ConnOK), ev("10.1.0.1:8080/TCP", bpf.ConnOK),
		ev("10.1.0.2:8080/TCP", bpf.ConnRefused), ev("[fd00:1::1]:8080/TCP", bpf.ConnOK)}
	var got []bpf.ConnEvent
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		got = append(got, reports(t, r, 100*time.Millisecond)...)
	}
	got = append(got, reports(t, r, 50*time.Millisecond)...)
	if !slices.Equal(got, want) {
		t.Errorf("reports:\n got %+v\nwant %+v", got, want)
	}
}
