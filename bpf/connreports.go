package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/lbstate/lbstate/lb"
)

// How the reference datapath reports the beginnings of the TCP
// connections it balances (c/conn.h): through a ring buffer it never
// waits on, a report that finds it full being counted as lost.

// sockOpsProgram is c/sockops.h's: connect() outcomes of balanced
// sockets, attached to the cgroup with the socket programs.
const sockOpsProgram = "lb_sock_ops"

// CTFlagUnanswered marks a TCP flow whose client sent its SYN again
// before any reply: reported once as a connect timeout.
const CTFlagUnanswered = 1 << 2

// CTFlagRefused marks a TCP flow whose backend's first reply was a RST:
// a new SYN on its tuple is balanced anew (see lb_ct_anew in c/tc.h).
const CTFlagRefused = 1 << 3

// ConnResult is how a connection to a backend began, as the datapath saw
// it (lb_conn_event.result).
type ConnResult uint8

const (
	// ConnOK: the backend answered the SYN (SYN-ACK, ESTABLISHED).
	ConnOK ConnResult = iota
	// ConnRefused: the backend answered the SYN with a RST.
	ConnRefused
	// ConnTimeout: no answer within the client's SYN retransmission
	// timeout (or the kernel's retries ran out).
	ConnTimeout
	// ConnError: the connect failed otherwise (an ICMP error).
	ConnError
)

var connResultNames = [...]string{"ok", "refused", "timeout", "error"}

func (r ConnResult) String() string {
	if int(r) < len(connResultNames) {
		return connResultNames[r]
	}
	return fmt.Sprintf("result(%d)", uint8(r))
}

// ConnSource is which programs saw a connection (lb_conn_event.source).
type ConnSource uint8

const (
	ConnSocket ConnSource = 1 // lb_sock_ops: a connect() of socket LB
	ConnTC     ConnSource = 2 // the tc programs: a SYN and its answer
)

func (s ConnSource) String() string {
	switch s {
	case ConnSocket:
		return "socket"
	case ConnTC:
		return "tc"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// ConnEvent is one report: the backend (a TCP address), how the
// connection began, and who saw it. BackendID and RevNatID are the flow's
// for tc, zero for sockets.
type ConnEvent struct {
	Backend   lb.L3n4Addr
	Result    ConnResult
	Source    ConnSource
	BackendID uint32
	RevNatID  uint32
}

// connEventSize is sizeof(struct lb_conn_event).
const connEventSize = 28

// decodeConnEvent decodes a ring buffer record.
func decodeConnEvent(b []byte) (ConnEvent, error) {
	if len(b) < connEventSize {
		return ConnEvent{}, fmt.Errorf("lb_dp_conn_events: a record of %d bytes, want %d", len(b), connEventSize)
	}
	addr := netip.AddrFrom16([16]byte(b[:16])).Unmap()
	port := binary.BigEndian.Uint16(b[16:18])
	return ConnEvent{
		Backend:   lb.NewL3n4Addr(lb.ProtoTCP, addr, port, lb.ScopeExternal),
		Result:    ConnResult(b[18]),
		Source:    ConnSource(b[19]),
		BackendID: binary.NativeEndian.Uint32(b[20:24]),
		RevNatID:  binary.NativeEndian.Uint32(b[24:28]),
	}, nil
}

// connMaps are the datapath's report maps, kept when reports are on.
type connMaps struct {
	events, lost *ebpf.Map
}

// take keeps clones of the report maps of a loaded collection.
func (c *connMaps) take(maps map[string]*ebpf.Map, on bool) {
	if !on {
		return
	}
	if m := maps["lb_dp_conn_events"]; m != nil {
		c.events, _ = m.Clone()
	}
	if m := maps["lb_dp_conn_lost"]; m != nil {
		c.lost, _ = m.Clone()
	}
}

func (c *connMaps) close() error {
	var errs []error
	for _, m := range []*ebpf.Map{c.events, c.lost} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	c.events, c.lost = nil, nil
	return errors.Join(errs...)
}

// attachSockOps attaches lb_sock_ops to the cgroup at path, if reports
// are on.
func (d *Datapath) attachSockOps(path string) error {
	if d.conn.events == nil {
		return nil
	}
	p := d.progs[sockOpsProgram]
	if p == nil {
		return fmt.Errorf("datapath: %s is not loaded", sockOpsProgram)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: path, Attach: ebpf.AttachCGroupSockOps, Program: p})
	if err != nil {
		return fmt.Errorf("datapath: attaching %s to cgroup %s: %w", sockOpsProgram, path, err)
	}
	d.links = append(d.links, l)
	return nil
}

// ConnReader reads the datapath's connection reports. One goroutine
// reads; Close may be called from any.
type ConnReader struct {
	r    *ringbuf.Reader
	rec  ringbuf.Record
	lost *ebpf.Map
}

// ConnectionReports returns a reader of the connection reports; an
// error unless the datapath was loaded with ConnectionReports.
func (d *Datapath) ConnectionReports() (*ConnReader, error) {
	if d.conn.events == nil {
		return nil, errors.New("datapath: loaded without connection reports")
	}
	r, err := ringbuf.NewReader(d.conn.events)
	if err != nil {
		return nil, fmt.Errorf("datapath: lb_dp_conn_events: %w", err)
	}
	return &ConnReader{r: r, lost: d.conn.lost}, nil
}

// ErrReaderClosed is Read's error once the reader is closed.
var ErrReaderClosed = os.ErrClosed

// Read appends to events the reports waiting, after waiting for a
// failure's report at most until deadline (successes wake no reader:
// they are read with the next failure, or at the deadline). It returns
// ErrReaderClosed once Close was called; a malformed record is skipped
// and returned as an error after the others.
func (c *ConnReader) Read(events []ConnEvent, deadline time.Time) ([]ConnEvent, error) {
	c.r.SetDeadline(deadline)
	var bad error
	for {
		err := c.r.ReadInto(&c.rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return events, bad
		case errors.Is(err, os.ErrClosed):
			return events, ErrReaderClosed
		case err != nil:
			return events, fmt.Errorf("datapath: lb_dp_conn_events: %w", err)
		}
		e, err := decodeConnEvent(c.rec.RawSample)
		if err != nil {
			bad = err
			continue
		}
		events = append(events, e)
		if c.r.AvailableBytes() == 0 {
			return events, bad
		}
	}
}

// Lost returns how many reports found the ring buffer full, since the
// datapath was loaded.
func (c *ConnReader) Lost() (uint64, error) {
	var perCPU []uint64
	if err := c.lost.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("datapath: lb_dp_conn_lost: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// Close ends a Read under way and releases the reader.
func (c *ConnReader) Close() error { return c.r.Close() }
