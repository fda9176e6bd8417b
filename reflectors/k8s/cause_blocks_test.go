package k8s

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// The history's causes are carved from shared blocks (newCause): each
// keeps the object, name and version it was made for, across blocks.
func TestCausesCarvedFromOneBlockKeepTheirOwn(t *testing.T) {
	r := &Reflector{}
	var cs []*tables.Cause
	for i := range 2*causeBlock + 1 {
		m := &metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("web-", i), ResourceVersion: fmt.Sprint(100 + i)}
		cs = append(cs, r.causeOf("EndpointSlice", lb.ServiceName{}, m, i%2 == 1))
	}
	for i, c := range cs {
		detail := ""
		if i%2 == 1 {
			detail = "deleted"
		}
		if c.Kind != "EndpointSlice" || c.Namespace != "ns" || c.Name != fmt.Sprint("web-", i) || c.ResourceVersion != fmt.Sprint(100+i) || c.Detail != detail {
			t.Errorf("cause %d: %+v", i, *c)
		}
	}
}
