package lb

import (
	"cmp"
	"fmt"
	"strings"
)

// ServiceName names a service: namespace and name, and for a service of
// another cluster, that cluster's name. It prints as "ns/name" or
// "cluster/ns/name".
//
// A ServiceName is its text form and where the parts start in it:
// comparable, 24 bytes, and free to print, order and index. The zero value
// is the empty name.
type ServiceName struct {
	text string
	// ns and name are where the namespace and the name start in text.
	ns, name uint32
}

// NewServiceName returns the name of a service in the local cluster.
func NewServiceName(namespace, name string) ServiceName {
	return makeServiceName("", namespace, name)
}

// WithCluster returns the same name in another cluster ("" is local).
func (n ServiceName) WithCluster(cluster string) ServiceName {
	return makeServiceName(cluster, n.Namespace(), n.Name())
}

// makeServiceName joins the parts; all-empty parts give the zero value, so
// that there is one empty name.
func makeServiceName(cluster, namespace, name string) ServiceName {
	switch {
	case cluster == "" && namespace == "" && name == "":
		return ServiceName{}
	case cluster == "":
		return ServiceName{text: namespace + "/" + name, name: uint32(len(namespace) + 1)}
	default:
		ns := uint32(len(cluster) + 1)
		return ServiceName{text: cluster + "/" + namespace + "/" + name, ns: ns, name: ns + uint32(len(namespace)+1)}
	}
}

// WithTextFrom returns the same name with its text as copyText returns
// it, which must be an equal string: for a name that many rows keep, a
// copy carved from memory shared with other names (internal/slab).
func (n ServiceName) WithTextFrom(copyText func(string) string) ServiceName {
	n.text = copyText(n.text)
	return n
}

func (n ServiceName) Cluster() string {
	if n.ns == 0 {
		return ""
	}
	return n.text[:n.ns-1]
}

func (n ServiceName) Namespace() string {
	if n.text == "" {
		return ""
	}
	return n.text[n.ns : n.name-1]
}

func (n ServiceName) Name() string   { return n.text[n.name:] }
func (n ServiceName) IsZero() bool   { return n.text == "" }
func (n ServiceName) String() string { return n.text }

// ParseServiceName parses "ns/name" or "cluster/ns/name".
func ParseServiceName(s string) (ServiceName, error) {
	parts := strings.Split(s, "/")
	var cluster, namespace, name string
	switch len(parts) {
	case 2:
		namespace, name = parts[0], parts[1]
	case 3:
		cluster, namespace, name = parts[0], parts[1], parts[2]
		if cluster == "" {
			return ServiceName{}, fmt.Errorf("service name %q: empty cluster", s)
		}
	default:
		return ServiceName{}, fmt.Errorf("service name %q: want namespace/name or cluster/namespace/name", s)
	}
	if namespace == "" || name == "" {
		return ServiceName{}, fmt.Errorf("service name %q: empty namespace or name", s)
	}
	return makeServiceName(cluster, namespace, name), nil
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
	if n.Namespace() == "" || n.Name() == "" {
		return fmt.Errorf("service name %q: empty namespace or name", n)
	}
	if strings.Count(n.text, "/") != 1+min(int(n.ns), 1) {
		return fmt.Errorf("service name %q: parts must not contain '/'", n)
	}
	return nil
}

// Compare orders names by their text form.
func (n ServiceName) Compare(o ServiceName) int {
	// Invalid names (parts holding '/') may share a text; the offsets
	// still tell them apart.
	return cmp.Or(strings.Compare(n.text, o.text), cmp.Compare(n.ns, o.ns), cmp.Compare(n.name, o.name))
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
