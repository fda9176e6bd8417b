package lb_test

import (
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func TestClaim(t *testing.T) {
	checkEnum(t, "claim",
		[]string{"explicit", "node-address", "reserved-node-port", "redirect"},
		[]lb.Claim{lb.ClaimExplicit, lb.ClaimNodeAddress, lb.ClaimReservedNodePort, lb.ClaimRedirect},
		[]string{"", "node", "implicit"})
}

// Claims are totally ordered, strongest first: a NodePort inside the
// reserved range, then an explicit address, then a node address's
// expansion, then a local redirect policy's address. (A cycle would let the order in which services arrive decide
// who owns an address.)
func TestClaimsOutrankInOneOrder(t *testing.T) {
	order := []lb.Claim{lb.ClaimReservedNodePort, lb.ClaimExplicit, lb.ClaimNodeAddress, lb.ClaimRedirect}
	for i, a := range order {
		for j, b := range order {
			if got := a.Outranks(b); got != (i < j) {
				t.Errorf("%s.Outranks(%s) = %v, want %v", a, b, got, i < j)
			}
		}
	}
}
