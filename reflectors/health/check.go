package health

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lbstate/lbstate/lb"
)

// Annotations on a Service that configure how its backends are checked.
// The Kubernetes source carries them (every annotation starting with
// lbstate.io/health-check) into lb.ServiceParams.Annotations; a value
// that does not parse, or is out of its bounds, is logged with the
// service, counted, and ignored: the node-wide default applies.
const (
	// AnnotationCheck is the probe: tcp (connect), http or https (GET,
	// expecting a status in AnnotationStatus's range), or none. Without
	// it TCP backends get a TCP probe, and others none: a UDP or SCTP
	// backend is probed only when its service says how.
	AnnotationCheck = "lbstate.io/health-check"
	// AnnotationPath is the HTTP(S) probe's path (default /).
	AnnotationPath = "lbstate.io/health-check-path"
	// AnnotationPort is the port to probe instead of the backend's.
	AnnotationPort = "lbstate.io/health-check-port"
	// AnnotationInterval and AnnotationTimeout are Go durations ("2s"),
	// from 10ms to 1h and to 1m.
	AnnotationInterval = "lbstate.io/health-check-interval"
	AnnotationTimeout  = "lbstate.io/health-check-timeout"
	// AnnotationStatus is the HTTP statuses that pass: "200-399" (the
	// default) or one code.
	AnnotationStatus = "lbstate.io/health-check-status"
	// AnnotationPassive is "false" for a service whose backends passive
	// reports do not judge (the datapath's, and Reporter's): only probes
	// do. "true" is the default.
	AnnotationPassive = "lbstate.io/health-check-passive"
	// AnnotationConsecutiveFailures is the service's own threshold: the
	// consecutive failures (probes or passive reports) that trip its
	// backends' breakers, and the successes that end probation, 1-100.
	AnnotationConsecutiveFailures = "lbstate.io/health-check-consecutive-failures"
)

// probeKind is how a backend is probed.
type probeKind uint8

const (
	// probeNone: not probed; only passive reports move its breaker.
	probeNone probeKind = iota
	probeTCP
	probeHTTP
	probeHTTPS
)

var probeKindNames = [...]string{"none", "tcp", "http", "https"}

func (k probeKind) String() string { return probeKindNames[k] }

// check is how one backend is probed.
type check struct {
	kind      probeKind
	port      uint16 // 0: the backend's own
	path      string
	interval  time.Duration
	timeout   time.Duration
	statusMin int
	statusMax int
	// explicit is set when the service's annotations chose the kind.
	explicit bool
	// noPassive: passive reports are ignored (AnnotationPassive).
	noPassive bool
	// threshold is the service's breaker threshold; 0: the node's.
	threshold int
}

// serviceCheck is what a service's annotations ask for, over the
// node-wide defaults. The kind is left to forBackend when they do not
// name one.
func serviceCheck(p *lb.ServiceParams, def check) (check, []error) {
	c := def
	var errs []error
	bad := func(key, val, want string) {
		errs = append(errs, fmt.Errorf("service %s: annotation %s: %q: %s; using the default", p.Name, key, val, want))
	}
	a := p.Annotations
	if v, ok := a[AnnotationCheck]; ok {
		i := slices.Index(probeKindNames[:], strings.ToLower(strings.TrimSpace(v)))
		if i < 0 {
			bad(AnnotationCheck, v, "want tcp, http, https or none")
		} else {
			c.kind, c.explicit = probeKind(i), true
		}
	}
	if v, ok := a[AnnotationPath]; ok {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\r\n") {
			bad(AnnotationPath, v, "want an absolute path such as /healthz")
		} else {
			c.path = v
		}
	}
	if v, ok := a[AnnotationPort]; ok {
		if port, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16); err != nil || port == 0 {
			bad(AnnotationPort, v, "want a port, 1-65535")
		} else {
			c.port = uint16(port)
		}
	}
	for _, d := range []struct {
		key   string
		to    *time.Duration
		limit time.Duration
	}{{AnnotationInterval, &c.interval, maxInterval}, {AnnotationTimeout, &c.timeout, maxTimeout}} {
		if v, ok := a[d.key]; ok {
			dur, err := time.ParseDuration(strings.TrimSpace(v))
			switch {
			case err != nil || dur < minDuration:
				bad(d.key, v, "want a duration of at least "+minDuration.String())
			case dur > d.limit:
				bad(d.key, v, "want a duration of at most "+d.limit.String())
			default:
				*d.to = dur
			}
		}
	}
	if v, ok := a[AnnotationPassive]; ok {
		if on, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			bad(AnnotationPassive, v, "want true or false")
		} else {
			c.noPassive = !on
		}
	}
	if v, ok := a[AnnotationConsecutiveFailures]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 || n > maxThreshold {
			bad(AnnotationConsecutiveFailures, v, "want a count, 1-100")
		} else {
			c.threshold = n
		}
	}
	if v, ok := a[AnnotationStatus]; ok {
		if lo, hi, ok := parseStatusRange(v); !ok {
			bad(AnnotationStatus, v, "want a status or a range, such as 200-399")
		} else {
			c.statusMin, c.statusMax = lo, hi
		}
	}
	return c, errs
}

// minDuration is the shortest interval or timeout an annotation may set:
// shorter ones turn a health checker into a load generator.
const minDuration = 10 * time.Millisecond

// forBackend is the check of one backend: without a kind from the
// service, TCP backends get a TCP probe, others none.
func (c check) forBackend(addr lb.L3n4Addr) check {
	if !c.explicit {
		c.kind = probeNone
		if addr.Protocol() == lb.ProtoTCP {
			c.kind = probeTCP
		}
	}
	return c
}

func parseStatusRange(s string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// The longest interval and timeout an annotation may set: a timeout is
// how long a probe holds one of the --health-max-concurrent slots, and
// an interval beyond an hour is not health checking.
const (
	maxTimeout  = time.Minute
	maxInterval = time.Hour
)

// maxThreshold bounds AnnotationConsecutiveFailures: a breaker that
// waits for more failures than this does not protect anyone.
const maxThreshold = 100
