package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// timeoutError is a probe cut by its timeout.
type timeoutError struct{ after time.Duration }

func (e timeoutError) Error() string { return "timeout after " + e.after.String() }

// describe is a probe's error as a log line and lbctl show it: what
// failed, without the address and the layers every probe shares
// ("connect: connection refused", not "dial tcp 10.0.1.1:8080: connect:
// connection refused").
func describe(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// lingerZero makes a dialer's connections close with a reset, as
// tcpProber's do.
func lingerZero(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	})
	return errors.Join(err, serr)
}

// httpProber GETs the check's path, on a new connection each time (a
// probe tests that the backend accepts connections too), and passes on a
// status in the check's range. It follows no redirect, uses no proxy,
// and does not verify certificates: backends are reached by address, so
// their certificates rarely name it.
type httpProber struct{ client *http.Client }

func newHTTPProber() *httpProber {
	return &httpProber{client: &http.Client{
		Transport: &http.Transport{
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil,
			DialContext:        (&net.Dialer{Control: lingerZero, KeepAlive: -1}).DialContext,
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, // see the type's comment
			// net/http reads up to 10 MiB of headers by default: 150
			// endpoints sending an endless header took 2.9 GB.
			MaxResponseHeaderBytes: maxHeader,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// maxHeader and maxBody are how much of a response's headers and body
// a probe reads: a longer header section fails the probe, a longer body
// is cut (the connection is closed).
const (
	maxHeader = 8 << 10
	maxBody   = 4 << 10
)

// probe runs one probe: nil means it passed. It returns when ctx is
// done, whatever the backend does.
func (p *httpProber) probe(ctx context.Context, to netip.AddrPort, c *check) error {
	scheme := "http"
	if c.kind == probeHTTPS {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+to.String()+c.path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "lbstate-health")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if resp.StatusCode < c.statusMin || resp.StatusCode > c.statusMax {
		return fmt.Errorf("HTTP status %d, want %s", resp.StatusCode, statusRange(c))
	}
	return nil
}

func statusRange(c *check) string {
	if c.statusMin == c.statusMax {
		return strconv.Itoa(c.statusMin)
	}
	return strconv.Itoa(c.statusMin) + "-" + strconv.Itoa(c.statusMax)
}
