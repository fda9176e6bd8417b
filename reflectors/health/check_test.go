package health

import (
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
)

var testDefaults = check{interval: 5 * time.Second, timeout: time.Second, path: "/", statusMin: 200, statusMax: 399}

func withAnnotations(a map[string]string) *lb.ServiceParams {
	return &lb.ServiceParams{Name: lb.NewServiceName("shop", "web"), Source: lb.SourceK8s, Annotations: a}
}

func TestServiceCheckFromAnnotations(t *testing.T) {
	c, errs := serviceCheck(withAnnotations(map[string]string{
		AnnotationCheck: "HTTPS", AnnotationPath: "/healthz", AnnotationPort: "8443",
		AnnotationInterval: "2s", AnnotationTimeout: "250ms", AnnotationStatus: "200-204",
	}), testDefaults)
	want := check{kind: probeHTTPS, explicit: true, port: 8443, path: "/healthz", interval: 2 * time.Second,
		timeout: 250 * time.Millisecond, statusMin: 200, statusMax: 204}
	if len(errs) != 0 || c != want {
		t.Errorf("got %+v %v\nwant %+v", c, errs, want)
	}
}

// A value that does not parse is reported with the service and the
// annotation, and that setting keeps its default; the others apply.
func TestServiceCheckBadValuesKeepDefaults(t *testing.T) {
	c, errs := serviceCheck(withAnnotations(map[string]string{
		AnnotationCheck: "grpc", AnnotationPath: "healthz", AnnotationPort: "70000",
		AnnotationInterval: "often", AnnotationTimeout: "1ms", AnnotationStatus: "500-200",
	}), testDefaults)
	if c != testDefaults {
		t.Errorf("bad values changed the check: %+v", c)
	}
	if len(errs) != 6 {
		t.Fatalf("%d errors, want 6: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !strings.HasPrefix(err.Error(), "service shop/web: annotation lbstate.io/health-check") || !strings.HasSuffix(err.Error(), "using the default") {
			t.Errorf("error %q does not name the service and annotation", err)
		}
	}
	c, errs = serviceCheck(withAnnotations(map[string]string{AnnotationInterval: "often", AnnotationStatus: "204"}), testDefaults)
	if len(errs) != 1 || c.statusMin != 204 || c.statusMax != 204 || c.interval != testDefaults.interval {
		t.Errorf("one bad value among good ones: %+v %v", c, errs)
	}
}

// Without a kind from its service, a TCP backend gets a TCP probe and
// others none; a service's kind applies to every backend, UDP included.
func TestCheckKindForBackend(t *testing.T) {
	tcp, udp := lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), lb.MustParseL3n4Addr("10.0.0.1:53/UDP")
	if k := testDefaults.forBackend(tcp).kind; k != probeTCP {
		t.Errorf("TCP backend, no annotation: %s", k)
	}
	if k := testDefaults.forBackend(udp).kind; k != probeNone {
		t.Errorf("UDP backend, no annotation: %s", k)
	}
	c, _ := serviceCheck(withAnnotations(map[string]string{AnnotationCheck: "tcp", AnnotationPort: "53"}), testDefaults)
	if got := c.forBackend(udp); got.kind != probeTCP || addrPort(udp, &got).String() != "10.0.0.1:53" {
		t.Errorf("UDP backend of a service asking for tcp: %+v", got)
	}
	c, _ = serviceCheck(withAnnotations(map[string]string{AnnotationCheck: "none"}), testDefaults)
	if k := c.forBackend(tcp).kind; k != probeNone {
		t.Errorf("TCP backend of a service asking for none: %s", k)
	}
}

// Backends that appear together have their probes spread over the
// interval rather than bunched at its start.
func TestPhaseSpreadsProbes(t *testing.T) {
	const n, buckets = 10000, 10
	interval := time.Second
	var count [buckets]int
	for i := range n {
		b := lb.NewL3n4Addr(lb.ProtoTCP, lb.MustParseL3n4Addr("10.0.0.0:80/TCP").Addr(), uint16(1024+i), lb.ScopeExternal)
		p := phase(b, interval)
		if p < 0 || p >= interval {
			t.Fatalf("phase %s outside the interval", p)
		}
		count[p*buckets/interval]++
	}
	for i, c := range count {
		if c < n/buckets*8/10 || c > n/buckets*12/10 {
			t.Errorf("tenth %d of the interval starts %d of %d probes: %v", i, c, n, count)
		}
	}
}
