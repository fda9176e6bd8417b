package e2e

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// conn is a TCP connection that stays open, from a namespace of the
// test, to a server that names itself at connect and at every line.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

// dial connects from ns (the socket stays in ns) and reads the first
// answer.
func dial(t testing.TB, ns *bpftest.Netns, to string) (*conn, string) {
	t.Helper()
	var c net.Conn
	check(t, ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", to, 5*time.Second); return err }))
	t.Cleanup(func() { c.Close() })
	p := &conn{c: c, r: bufio.NewReader(c)}
	name, err := p.read()
	check(t, err)
	return p, name
}

func (p *conn) read() (string, error) {
	p.c.SetDeadline(time.Now().Add(5 * time.Second))
	s, err := p.r.ReadString('\n')
	return strings.TrimSpace(s), err
}

// ask sends a line and returns who answered.
func (p *conn) ask() (string, error) {
	p.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := p.c.Write([]byte("again\n")); err != nil {
		return "", err
	}
	return p.read()
}
