package lb

import (
	"fmt"
	"strings"
	"unique"
)

// ServiceName names a service: namespace and name, and for a service of
// another cluster, that cluster's name. It prints as "ns/name" or
// "cluster/ns/name".
//
// A ServiceName is one interned pointer: comparable, cheap to copy and to
// keep in many objects. The zero value is the empty name.
type ServiceName struct {
	h unique.Handle[serviceNameParts]
}

type serviceNameParts struct {
	cluster, namespace, name string
	// text is the String form, derived from the others when interned, so
	// that printing (and index keys) need not build it each time.
	text string
}

// NewServiceName returns the name of a service in the local cluster.
func NewServiceName(namespace, name string) ServiceName {
	return makeServiceName(serviceNameParts{namespace: namespace, name: name})
}

// WithCluster returns the same name in another cluster ("" is local).
func (n ServiceName) WithCluster(cluster string) ServiceName {
	p := n.parts()
	p.cluster = cluster
	return makeServiceName(p)
}

// makeServiceName interns p; all-empty parts give the zero value, so that
// there is one empty name.
func makeServiceName(p serviceNameParts) ServiceName {
	p.text = ""
	if p == (serviceNameParts{}) {
		return ServiceName{}
	}
	if p.cluster != "" {
		p.text = p.cluster + "/" + p.namespace + "/" + p.name
	} else {
		p.text = p.namespace + "/" + p.name
	}
	return ServiceName{unique.Make(p)}
}

func (n ServiceName) parts() serviceNameParts {
	if n.IsZero() {
		return serviceNameParts{}
	}
	return n.h.Value()
}

func (n ServiceName) Cluster() string   { return n.parts().cluster }
func (n ServiceName) Namespace() string { return n.parts().namespace }
func (n ServiceName) Name() string      { return n.parts().name }
func (n ServiceName) IsZero() bool      { return n == ServiceName{} }

func (n ServiceName) String() string { return n.parts().text }

// ParseServiceName parses "ns/name" or "cluster/ns/name".
func ParseServiceName(s string) (ServiceName, error) {
	parts := strings.Split(s, "/")
	var p serviceNameParts
	switch len(parts) {
	case 2:
		p.namespace, p.name = parts[0], parts[1]
	case 3:
		p.cluster, p.namespace, p.name = parts[0], parts[1], parts[2]
		if p.cluster == "" {
			return ServiceName{}, fmt.Errorf("service name %q: empty cluster", s)
		}
	default:
		return ServiceName{}, fmt.Errorf("service name %q: want namespace/name or cluster/namespace/name", s)
	}
	if p.namespace == "" || p.name == "" {
		return ServiceName{}, fmt.Errorf("service name %q: empty namespace or name", s)
	}
	return makeServiceName(p), nil
}

// MustParseServiceName is ParseServiceName that panics on error.
func MustParseServiceName(s string) ServiceName {
	n, err := ParseServiceName(s)
	if err != nil {
		panic(err)
	}
	return n
}

// Validate reports whether the name is complete and printable in a form
// that parses back to it.
func (n ServiceName) Validate() error {
	p := n.parts()
	if p.namespace == "" || p.name == "" {
		return fmt.Errorf("service name %q: empty namespace or name", n)
	}
	if strings.Contains(p.cluster+p.namespace+p.name, "/") {
		return fmt.Errorf("service name %q: parts must not contain '/'", n)
	}
	return nil
}

// Compare orders names by their text form.
func (n ServiceName) Compare(o ServiceName) int {
	if n == o {
		return 0
	}
	return strings.Compare(n.String(), o.String())
}

func (n ServiceName) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

func (n *ServiceName) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*n = ServiceName{}
		return nil
	}
	v, err := ParseServiceName(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}
