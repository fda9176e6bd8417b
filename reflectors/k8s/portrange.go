package k8s

import (
	"fmt"
	"strconv"
	"strings"
)

// PortRange is an inclusive range of ports, such as the cluster's
// node-port range (kube-apiserver's --service-node-port-range).
type PortRange struct{ First, Last uint16 }

// DefaultNodePortRange is Kubernetes' default node-port range.
var DefaultNodePortRange = PortRange{30000, 32767}

// ParsePortRange parses "FIRST-LAST", as kube-apiserver writes the
// node-port range.
func ParsePortRange(s string) (PortRange, error) {
	first, last, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return PortRange{}, fmt.Errorf("port range %q: want FIRST-LAST, e.g. 30000-32767", s)
	}
	var r PortRange
	for _, p := range []struct {
		text string
		to   *uint16
	}{{first, &r.First}, {last, &r.Last}} {
		n, err := strconv.ParseUint(strings.TrimSpace(p.text), 10, 16)
		if err != nil || n == 0 {
			return PortRange{}, fmt.Errorf("port range %q: %q is not a port from 1 to 65535", s, p.text)
		}
		*p.to = uint16(n)
	}
	if r.First > r.Last {
		return PortRange{}, fmt.Errorf("port range %q: %d is after %d", s, r.First, r.Last)
	}
	return r, nil
}

// Contains reports whether port p is in the range.
func (r PortRange) Contains(p uint16) bool { return r.First <= p && p <= r.Last }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }
