package lb

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ProxyRedirect sends the new flows of a service's frontends to an L7
// proxy on this node (Envoy, a sidecar-less mesh proxy) listening on
// ProxyPort, instead of to a backend. The backends the frontend would use
// stay selected and in the maps, for the proxy to balance over. Like a
// Redirect it is kept beside the service: it may come before the service
// is declared, survives every later upsert, and clearing it restores
// exactly what was there before. It applies on top of whatever backends a
// frontend has: its own, a redirect's.
type ProxyRedirect struct {
	Source    Source `json:"source" yaml:"source"`
	ProxyPort uint16 `json:"proxyPort" yaml:"proxyPort"`
	// Ports, if not empty, limits the proxy redirect to the frontends
	// whose port name is listed.
	Ports []string `json:"ports,omitempty" yaml:"ports,omitempty"`
}

// Covers reports whether the proxy redirect applies to the frontend fe.
func (pr ProxyRedirect) Covers(fe FrontendParams) bool {
	return len(pr.Ports) == 0 || slices.Contains(pr.Ports, fe.PortName)
}

// Equal reports whether two proxy redirects are the same.
func (pr ProxyRedirect) Equal(o ProxyRedirect) bool {
	return pr.Source == o.Source && pr.ProxyPort == o.ProxyPort && slices.Equal(pr.Ports, o.Ports)
}

func (pr ProxyRedirect) String() string {
	s := "proxy:" + strconv.Itoa(int(pr.ProxyPort))
	if len(pr.Ports) > 0 {
		s += "[" + strings.Join(pr.Ports, ",") + "]"
	}
	return s + " (" + pr.Source.String() + ")"
}

// Validate reports what is wrong with a proxy redirect of service name.
func (pr ProxyRedirect) Validate(name ServiceName) error {
	switch {
	case !pr.Source.Valid():
		return fmt.Errorf("service %s: proxy redirect source: unknown source %s", name, pr.Source)
	case pr.ProxyPort == 0:
		return fmt.Errorf("service %s: proxy redirect port: missing (1-65535)", name)
	}
	for i, p := range pr.Ports {
		if p == "" {
			return fmt.Errorf("service %s: proxy redirect ports[%d]: empty port name", name, i)
		}
	}
	return nil
}
