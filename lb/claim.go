package lb

// Claim is how a service came to claim a frontend address. When several
// services claim one address, the strongest claim owns it (see the
// Writer's rules): an address someone named for a service must not go to
// a NodePort or host port that reaches it only because the node happens
// to have that address (a LoadBalancer VIP equal to the node's IP).
type Claim uint8

const (
	// ClaimExplicit: the address was named for the service (a ClusterIP,
	// a LoadBalancer ingress IP, an external IP, a host port's hostIP, or
	// any address a source declares as such). The zero value.
	ClaimExplicit Claim = iota
	// ClaimNodeAddress: the frontend exists only because the node has the
	// address (a NodePort or host port on a node address, or on the
	// node-wide any-address). Explicit claims outrank it.
	ClaimNodeAddress
	// ClaimReservedNodePort: a NodePort's ClaimNodeAddress inside the
	// cluster's node-port range, which Kubernetes reserves for NodePorts
	// (kube-proxy serves them before LoadBalancer and external IPs there).
	// It outranks every other claim.
	ClaimReservedNodePort
	// ClaimRedirect: a local redirect policy's addressMatcher, which
	// diverts an address to this node's pods but must not take it from
	// a Service that has it; it gets the address only when no Service
	// claims it. The weakest claim, for LocalRedirect frontends only.
	ClaimRedirect
)

var claimNames = enumNames[Claim]{"claim", []string{"explicit", "node-address", "reserved-node-port", "redirect"}}

func (c Claim) String() string               { return claimNames.String(c) }
func (c Claim) MarshalText() ([]byte, error) { return []byte(c.String()), nil }
func (c *Claim) UnmarshalText(b []byte) (err error) {
	*c, err = claimNames.Parse(string(b))
	return
}

// claimRank orders claims, strongest first.
var claimRank = [...]int{ClaimReservedNodePort: 0, ClaimExplicit: 1, ClaimNodeAddress: 2, ClaimRedirect: 3}

// Outranks reports whether c is a stronger claim on an address than other.
func (c Claim) Outranks(other Claim) bool { return claimRank[c] < claimRank[other] }

// validFor reports what is wrong with claim c for a frontend of type t:
// only NodePort and HostPort frontends expand onto node addresses, and
// only NodePorts have a reserved range, only redirects are redirects.
func (c Claim) validFor(t SVCType) string {
	switch {
	case !claimNames.Valid(c):
		return "value out of range"
	case c == ClaimNodeAddress && t != SVCTypeNodePort && t != SVCTypeHostPort:
		return "node-address is for NodePort and HostPort frontends, not " + t.String()
	case c == ClaimReservedNodePort && t != SVCTypeNodePort:
		return "reserved-node-port is for NodePort frontends, not " + t.String()
	case c == ClaimRedirect && t != SVCTypeLocalRedirect:
		return "redirect is for LocalRedirect frontends, not " + t.String()
	}
	return ""
}
