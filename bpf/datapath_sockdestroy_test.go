package bpf_test

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// A connected UDP socket that socket LB sent to a backend since deleted
// is destroyed: its pending read fails (ECONNABORTED), so the
// application connects again. A connected socket whose backend stays is
// left alone. Real sockets of a process in the test's cgroup, in the
// test's network namespace.
func TestSocketLBDestroysConnectedUDPSocketsOfADeletedBackend(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{7}})
	s.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{8}})
	destroyed, lines := s.reapDuringUDPWait(t, "10.96.0.10:53", "10.96.0.11:53", 2, 8, 7)
	if destroyed != 1 {
		t.Errorf("destroyed %d sockets, want 1 (the one whose backend went)", destroyed)
	}
	if !strings.HasPrefix(lines[0], "first ") || !strings.Contains(lines[0], unix.ECONNABORTED.Error()) {
		t.Errorf("the socket of the deleted backend: %q, want its read to fail with ECONNABORTED", lines[0])
	}
	if lines[1] != "second b2" {
		t.Errorf("the socket of the backend that stays: %q, want it to exchange with b2", lines[1])
	}
	// The client closed both: neither left an lb_sock_ct entry, the
	// destroyed one (disconnected, so lb_sock_release cannot name its
	// entry) included.
	if n, err := bpf.Count(s.maps.SockConntrack); err != nil || n != 0 {
		t.Errorf("after the client closed its sockets, lb_sock_ct holds %d entries (%v), want 0", n, err)
	}
}

// reapDuringUDPWait runs the client's "udpwait a1 a2" (see bpftest.RunClient);
// once its second socket connected (a flow counted for frontend revNat,
// backend backendID), deletes backend gone and runs the reaper in the
// test's namespace. It returns how many sockets the reaper destroyed and
// the client's two lines.
func (s *sockSetup) reapDuringUDPWait(t *testing.T, a1, a2 string, revNat, backendID, gone uint32) (int, []string) {
	t.Helper()
	return s.reapDuringUDPWaitAfter(t, a1, a2, revNat, backendID, func() { s.check(s.maps.Backends.Delete(gone)) })
}

// reapDuringUDPWaitAfter is reapDuringUDPWait with change for the
// backend's deletion.
func (s *sockSetup) reapDuringUDPWaitAfter(t *testing.T, a1, a2 string, revNat, backendID uint32, change func()) (int, []string) {
	t.Helper()
	done := make(chan []string, 1)
	go func() {
		defer close(done)
		done <- bpftest.RunClient(t, s.cg, s.ns, "udpwait "+a1+" "+a2)
	}()
	for deadline := time.Now().Add(10 * time.Second); s.counter(revNat, backendID).Flows == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client's second socket never connected")
		}
	}
	change()
	var destroyed int
	err := s.ns.Do(func() (err error) {
		destroyed, err = s.dp.DestroyOrphanedUDPSockets()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	select {
	case lines = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not finish")
	}
	if len(lines) != 2 {
		t.Fatalf("the client printed %q, want two lines", lines)
	}
	return destroyed, lines
}

// A connected UDP socket that socket LB sent to the L7 proxy of a
// proxy-redirected frontend (backend ID 0 in lb_sock_ct) is not an
// orphan: the reaper leaves it alone, while it still destroys a socket
// whose backend went. It once took backend ID 0, which never reads back
// from lb_backends, for a deleted backend and destroyed every such
// socket.
func TestSocketLBReaperSparesConnectedUDPSocketsOfTheProxy(t *testing.T) {
	s := newSockSetup(t)
	bpftest.ServeName(t, s.ns, "127.0.0.1", 15053, "proxy")
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{7}})
	s.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{8}, proxy: 15053})
	destroyed, lines := s.reapDuringUDPWait(t, "10.96.0.10:53", "10.96.0.11:53", 2, 0, 7)
	if destroyed != 1 {
		t.Errorf("destroyed %d sockets, want 1 (the one whose backend went, not the proxy's)", destroyed)
	}
	if !strings.HasPrefix(lines[0], "first ") || !strings.Contains(lines[0], unix.ECONNABORTED.Error()) {
		t.Errorf("the socket of the deleted backend: %q, want its read to fail with ECONNABORTED", lines[0])
	}
	if lines[1] != "second proxy" {
		t.Errorf("the socket to the proxy: %q, want it to exchange with the proxy", lines[1])
	}
}

// A connected UDP socket that socket LB sent to the L7 proxy of a
// proxy-redirected frontend is destroyed once the redirect is removed
// (the frontend's master entry no longer names that proxy): it would
// send to the proxy forever. Connected again, it goes to a backend.
func TestSocketLBDestroysConnectedUDPSocketsOfARemovedProxyRedirect(t *testing.T) {
	s := newSockSetup(t)
	bpftest.ServeName(t, s.ns, "127.0.0.1", 15053, "proxy")
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{7}, proxy: 15053})
	s.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{8}})
	destroyed, lines := s.reapDuringUDPWaitAfter(t, "10.96.0.10:53", "10.96.0.11:53", 2, 8, func() {
		s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{7}}) // the redirect goes
	})
	if destroyed != 1 {
		t.Errorf("destroyed %d sockets, want 1 (the proxy's, whose redirect went)", destroyed)
	}
	if !strings.HasPrefix(lines[0], "first ") || !strings.Contains(lines[0], unix.ECONNABORTED.Error()) {
		t.Errorf("the socket to the proxy: %q, want its read to fail with ECONNABORTED", lines[0])
	}
	if lines[1] != "second b2" {
		t.Errorf("the socket of the other frontend: %q, want it to exchange with b2", lines[1])
	}
}
