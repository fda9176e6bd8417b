package tables

import (
	"slices"
	"testing"
)

// Sets copied from one (a service's set, copied into the entry of each
// of its frontends) share its list of causes after the second: adding
// to one, or joining it into another, never shows in the others.
func TestCauseSetsCopiedFromOneKeepTheirOwnCauses(t *testing.T) {
	a, b, c, d, e := &Cause{Name: "a"}, &Cause{Name: "b"}, &Cause{Name: "c"}, &Cause{Name: "d"}, &Cause{Name: "e"}
	var s causeSet
	s.add(a)
	s.add(b)
	s.add(c) // behind the pointer
	u := s
	s.add(d)
	u.add(e)
	var v causeSet
	v.join(u)
	v.add(d)
	for _, x := range []struct {
		name string
		set  causeSet
		want []*Cause
	}{
		{"s", s, []*Cause{a, b, c, d}},
		{"u (copied from s)", u, []*Cause{a, b, c, e}},
		{"v (joined from u)", v, []*Cause{a, b, c, e, d}},
	} {
		if got := x.set.all(); !slices.Equal(got, x.want) {
			t.Errorf("%s: %v, want %v", x.name, got, x.want)
		}
	}
}
