package lb_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func TestNewServiceName(t *testing.T) {
	n := lb.NewServiceName("default", "web")
	if n.Namespace() != "default" || n.Name() != "web" || n.Cluster() != "" {
		t.Errorf("parts = %q/%q/%q", n.Cluster(), n.Namespace(), n.Name())
	}
	if n.String() != "default/web" {
		t.Errorf("String() = %q", n.String())
	}
	if n.IsZero() {
		t.Error("IsZero() = true")
	}
	if err := n.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}

	c := n.WithCluster("c2")
	if c.Cluster() != "c2" || c.Namespace() != "default" || c.Name() != "web" {
		t.Errorf("WithCluster parts = %q/%q/%q", c.Cluster(), c.Namespace(), c.Name())
	}
	if c.String() != "c2/default/web" {
		t.Errorf("WithCluster String() = %q", c.String())
	}
	if c == n {
		t.Error("WithCluster gave an equal name")
	}
	if n.String() != "default/web" {
		t.Errorf("WithCluster modified the receiver: %q", n)
	}
	if back := c.WithCluster(""); back != n {
		t.Errorf("WithCluster(\"\") = %q, want %q", back, n)
	}
}

func TestParseServiceName(t *testing.T) {
	tests := []struct {
		in                       string
		cluster, namespace, name string
	}{
		{"default/web", "", "default", "web"},
		{"kube-system/kube-dns", "", "kube-system", "kube-dns"},
		{"c2/default/web", "c2", "default", "web"},
		{"a/b/c", "a", "b", "c"},
		{"ns/na me", "", "ns", "na me"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := lb.ParseServiceName(tt.in)
			if err != nil {
				t.Fatalf("ParseServiceName: %v", err)
			}
			if n.Cluster() != tt.cluster || n.Namespace() != tt.namespace || n.Name() != tt.name {
				t.Errorf("parts = %q/%q/%q, want %q/%q/%q",
					n.Cluster(), n.Namespace(), n.Name(), tt.cluster, tt.namespace, tt.name)
			}
			if n.String() != tt.in {
				t.Errorf("String() = %q, want %q", n.String(), tt.in)
			}
			built := lb.NewServiceName(tt.namespace, tt.name).WithCluster(tt.cluster)
			if built != n {
				t.Errorf("parsed name %q != name built from parts %q", n, built)
			}
			if m := lb.MustParseServiceName(n.String()); m != n {
				t.Errorf("String does not parse back: %q", m)
			}
			var u lb.ServiceName
			if err := u.UnmarshalText([]byte(tt.in)); err != nil || u != n {
				t.Errorf("UnmarshalText = %q, %v", u, err)
			}
			if text, _ := n.MarshalText(); string(text) != tt.in {
				t.Errorf("MarshalText = %q", text)
			}
			if err := n.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestParseServiceNameErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", "want namespace/name"},
		{"web", "want namespace/name"},
		{"a/b/c/d", "want namespace/name"},
		{"/x", "empty namespace or name"},
		{"ns/", "empty namespace or name"},
		{"/", "empty namespace or name"},
		{"/ns/name", "empty cluster"},
		{"c//name", "empty namespace or name"},
		{"c/ns/", "empty namespace or name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := lb.ParseServiceName(tt.in)
			wantErr(t, err, tt.want, `"`+tt.in+`"`)
			if !n.IsZero() {
				t.Errorf("got %q with the error, want the zero name", n)
			}
			if tt.in != "" {
				var u lb.ServiceName
				if err := u.UnmarshalText([]byte(tt.in)); err == nil {
					t.Errorf("UnmarshalText(%q) succeeded", tt.in)
				}
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseServiceName did not panic")
		}
	}()
	lb.MustParseServiceName("web")
}

func TestServiceNameInterning(t *testing.T) {
	ns, name := strings.Repeat("d", 3), "web"
	a := lb.NewServiceName("ddd", "web")
	b := lb.NewServiceName(ns, name)
	c := lb.MustParseServiceName("ddd/web")
	if a != b || a != c {
		t.Errorf("equal names built separately differ: %q %q %q", a, b, c)
	}
	if a.Compare(c) != 0 {
		t.Errorf("Compare = %d", a.Compare(c))
	}
	m := map[lb.ServiceName]int{a: 1}
	if m[c] != 1 {
		t.Error("parsed name does not find the map entry of the built one")
	}
	d := lb.MustParseServiceName("x/ddd/web")
	if d == a || d != lb.NewServiceName("ddd", "web").WithCluster("x") {
		t.Error("cluster names intern wrongly")
	}
	if lb.NewServiceName("ddd", "web2") == a || lb.NewServiceName("dd", "dweb") == a {
		t.Error("different names compare equal")
	}
}

func TestServiceNameZero(t *testing.T) {
	var n lb.ServiceName
	if !n.IsZero() {
		t.Error("zero value is not IsZero")
	}
	if n.String() != "" || n.Namespace() != "" || n.Name() != "" || n.Cluster() != "" {
		t.Errorf("zero value prints %q", n)
	}
	wantErr(t, n.Validate(), "empty namespace or name")
	if text, err := n.MarshalText(); err != nil || len(text) != 0 {
		t.Errorf("MarshalText = %q, %v", text, err)
	}
	u := lb.NewServiceName("a", "b")
	if err := u.UnmarshalText(nil); err != nil || !u.IsZero() {
		t.Errorf("UnmarshalText(empty) = %q, %v", u, err)
	}
	if lb.NewServiceName("a", "b").IsZero() {
		t.Error("a real name IsZero")
	}
}

// Empty names built from empty parts should be the zero name: the package
// says the zero value is the empty name, and the text form "" decodes to
// the zero value.
func TestServiceNameEmptyPartsIsZero(t *testing.T) {
	for _, n := range []lb.ServiceName{lb.NewServiceName("", ""), lb.ServiceName{}.WithCluster("")} {
		if !n.IsZero() || n != (lb.ServiceName{}) {
			t.Errorf("empty name %q is not the zero value", n)
		}
	}
}

func TestServiceNameValidate(t *testing.T) {
	for _, tt := range []struct {
		n    lb.ServiceName
		want string
	}{
		{lb.NewServiceName("", "web"), "empty namespace or name"},
		{lb.NewServiceName("default", ""), "empty namespace or name"},
		{lb.NewServiceName("a/b", "web"), "must not contain '/'"},
		{lb.NewServiceName("default", "w/eb"), "must not contain '/'"},
		{lb.NewServiceName("default", "web").WithCluster("c/2"), "must not contain '/'"},
	} {
		wantErr(t, tt.n.Validate(), tt.want)
	}
}

func TestServiceNameCompare(t *testing.T) {
	names := []lb.ServiceName{
		{},
		lb.MustParseServiceName("a/a"),
		lb.MustParseServiceName("a/b"),
		lb.MustParseServiceName("b/a"),
		lb.MustParseServiceName("c2/a/a"),
		lb.MustParseServiceName("default/web"),
	}
	for i, a := range names {
		for j, b := range names {
			got := a.Compare(b)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("Compare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestServiceNameJSON(t *testing.T) {
	type wrapper struct {
		Name  lb.ServiceName `json:"name"`
		Other lb.ServiceName `json:"other"`
		Empty lb.ServiceName `json:"empty"`
	}
	in := wrapper{Name: lb.NewServiceName("default", "web"), Other: lb.MustParseServiceName("c2/ns/db")}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"default/web","other":"c2/ns/db","empty":""}`; string(out) != want {
		t.Errorf("json.Marshal = %s, want %s", out, want)
	}
	var back wrapper
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back != in {
		t.Errorf("round trip = %+v, want %+v", back, in)
	}
	if err := json.Unmarshal([]byte(`{"name":"web"}`), &back); err == nil {
		t.Error("json.Unmarshal accepted a name without namespace")
	}
}

func FuzzParseServiceName(f *testing.F) {
	for _, s := range []string{
		"default/web", "c2/default/web", "a/b", "", "web", "/", "//", "a/b/c/d",
		"/x", "ns/", "/ns/name", "c//n", "ns/na me", "\xff/\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := lb.ParseServiceName(s)
		if err != nil {
			if !n.IsZero() {
				t.Fatalf("ParseServiceName(%q) returned %q with error %v", s, n, err)
			}
			return
		}
		if n.IsZero() {
			t.Fatalf("ParseServiceName(%q) returned the zero name", s)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("ParseServiceName(%q) = %q, which does not validate: %v", s, n, err)
		}
		printed := n.String()
		if printed != s {
			t.Fatalf("ParseServiceName(%q).String() = %q", s, printed)
		}
		m, err := lb.ParseServiceName(printed)
		if err != nil {
			t.Fatalf("String %q does not parse: %v", printed, err)
		}
		if m != n || m.Compare(n) != 0 {
			t.Fatalf("ParseServiceName(%q) = %q, String parses to %q", s, n, m)
		}
		if m.String() != printed {
			t.Fatalf("printing is not stable: %q then %q", printed, m.String())
		}
		built := lb.NewServiceName(n.Namespace(), n.Name()).WithCluster(n.Cluster())
		if built != n {
			t.Fatalf("name built from parts of %q differs", n)
		}
	})
}
