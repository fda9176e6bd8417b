package lb

import (
	"reflect"
	"testing"
	"time"
)

// The package doc's equality section says which types compare with ==:
// this keeps it true. A type moved from one list to the other (a slice
// added to a comparable value, say) fails here until the doc follows.
func TestEqualityAsDocumented(t *testing.T) {
	comparable := []any{L3n4Addr{}, ServiceName{}, Protocol(0), Scope(0), SVCType(0), Source(0), BackendState(0),
		Algorithm(0), Claim(0), TrafficPolicy(0), TrafficDistribution(0), ClusterAffinity(0),
		FrontendParams{}, BackendRef{}, RedirectPort{}, RouteBackend{}, FrontendConflict{}, Label{}}
	for _, v := range comparable {
		if !reflect.TypeOf(v).Comparable() {
			t.Errorf("%T is documented as comparable with == but is not", v)
		}
	}
	withSlices := []any{ServiceParams{}, Route{}, Redirect{}, ProxyRedirect{}, Node{}, FrontendExtras{}}
	for _, v := range withSlices {
		if reflect.TypeOf(v).Comparable() {
			t.Errorf("%T is documented as needing Equal (== does not compile) but is comparable", v)
		}
	}
	// The traps: these compile with == and need Equal all the same.
	// Equal port names behind two pointers, as two params have once the
	// interned lists are many.
	a := BackendParams{Address: MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 1}
	b := a
	a.hints, b.hints = &backendHints{portNames: []string{"http"}}, &backendHints{portNames: []string{"http"}}
	if !a.Equal(&b) || a == b || (BackendInstance{Params: a}) == (BackendInstance{Params: b}) {
		t.Errorf("BackendParams: Equal %v, == %v; want Equal true, == false", a.Equal(&b), a == b)
	}
	now := time.Now()
	v, w := HealthVerdict{Since: now}, HealthVerdict{Since: now.Round(0).In(time.FixedZone("x", 3600))}
	if !v.Equal(w) || v == w {
		t.Errorf("HealthVerdict: Equal %v, == %v; want Equal true, == false for one instant in two forms", v.Equal(w), v == w)
	}
}
