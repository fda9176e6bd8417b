package lb_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func TestBackendParamsJSON(t *testing.T) {
	addr := lb.MustParseL3n4Addr("10.0.0.1:8080/TCP")
	tests := []struct {
		name string
		in   string
		want lb.BackendParams
	}{
		{"missing weight", `{"address":"10.0.0.1:8080/TCP"}`,
			lb.BackendParams{Address: addr, Weight: lb.DefaultBackendWeight}},
		{"explicit zero", `{"address":"10.0.0.1:8080/TCP","weight":0}`,
			lb.BackendParams{Address: addr, Weight: 0}},
		{"explicit weight", `{"address":"10.0.0.1:8080/TCP","weight":65535}`,
			lb.BackendParams{Address: addr, Weight: 65535}},
		{"all fields", `{"address":"10.0.0.1:8080/tcp","portNames":["http","metrics"],"weight":5,
			"nodeName":"n1","zone":"z1","forZones":["z1","z2"],"forNodes":["n1"],
			"clusterID":7,"state":"Terminating"}`,
			lb.BackendParams{Address: addr, Weight: 5, NodeName: "n1", Zone: "z1", ClusterID: 7, State: lb.BackendTerminating}.
				WithPortNames("http", "metrics").WithTopologyHints([]string{"z1", "z2"}, []string{"n1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p lb.BackendParams
			if err := json.Unmarshal([]byte(tt.in), &p); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !p.Equal(&tt.want) {
				t.Errorf("decoded %+v, want %+v", p, tt.want)
			}
		})
	}

	// The default applies to each element of a list, too.
	var list []lb.BackendParams
	if err := json.Unmarshal([]byte(`[{"address":"10.0.0.1:80/TCP"},{"address":"10.0.0.2:80/TCP","weight":0}]`), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Weight != lb.DefaultBackendWeight || list[1].Weight != 0 {
		t.Errorf("decoded list %+v", list)
	}

	// null leaves the value alone, as encoding/json does for structs.
	p := lb.BackendParams{Address: addr, Weight: 7}
	if err := json.Unmarshal([]byte(` null `), &p); err != nil || p.Weight != 7 || p.Address != addr {
		t.Errorf("null changed the value to %+v (err %v)", p, err)
	}
}

func TestBackendParamsJSONErrors(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{`{"address":"10.0.0.1:80/TCP","wieght":5}`, []string{"backend", "wieght"}},
		{`{"address":"10.0.0.1:80/TCP","weight":70000}`, []string{"backend", "weight"}},
		{`{"address":"10.0.0.1:80/TCP","weight":-1}`, []string{"weight"}},
		{`{"address":"10.0.0.1:80/TCP","weight":1.5}`, []string{"weight"}},
		{`{"address":"10.0.0.1:80"}`, []string{"missing protocol"}},
		{`{"address":"10.0.0.1:80/TCP","state":"gone"}`, []string{"unknown backend state"}},
		{`{"address":"10.0.0.1:80/TCP","portNames":"http"}`, []string{"portNames"}},
		{`["10.0.0.1:80/TCP"]`, []string{"backend"}},
		{`{"address":`, nil},
	} {
		var p lb.BackendParams
		err := json.Unmarshal([]byte(tt.in), &p)
		if err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", tt.in, p)
			continue
		}
		for _, s := range tt.want {
			wantErr(t, err, s)
		}
	}
}

func TestBackendParamsValidate(t *testing.T) {
	valid := lb.BackendParams{
		Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"),
		Weight:  lb.DefaultBackendWeight,
		State:   lb.BackendMaintenance,
	}.WithPortNames("http")
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*lb.BackendParams)
		want   []string
	}{
		{"missing address", func(p *lb.BackendParams) { p.Address = lb.L3n4Addr{} },
			[]string{"backend address", "missing address"}},
		{"unspecified v4", func(p *lb.BackendParams) { p.Address = lb.MustParseL3n4Addr("0.0.0.0:80/TCP") },
			[]string{"backend 0.0.0.0:80/TCP", "unspecified address"}},
		{"unspecified v6", func(p *lb.BackendParams) { p.Address = lb.MustParseL3n4Addr("[::]:80/TCP") },
			[]string{"backend [::]:80/TCP", "unspecified address"}},
		{"unspecified no port", func(p *lb.BackendParams) { p.Address = lb.MustParseL3n4Addr("0.0.0.0:0/TCP") },
			[]string{"backend address", "unspecified address needs a port"}},
		{"internal scope", func(p *lb.BackendParams) { p.Address = lb.MustParseL3n4Addr("10.0.0.1:8080/TCP/i") },
			[]string{"backend 10.0.0.1:8080/TCP/i", "no scope"}},
		{"state", func(p *lb.BackendParams) { p.State = lb.BackendNotReady + 1 },
			[]string{"backend 10.0.0.1:8080/TCP", "state: value out of range"}},
		{"empty port name", func(p *lb.BackendParams) { *p = p.WithPortNames("http", "") },
			[]string{"backend 10.0.0.1:8080/TCP", "portNames[1]", "empty name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid
			tt.mutate(&p)
			wantErr(t, p.Validate(), tt.want...)
		})
	}
}

func TestBackendParamsEqual(t *testing.T) {
	base := func() lb.BackendParams {
		return lb.BackendParams{
			Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 3,
			NodeName: "n1", Zone: "z1", ClusterID: 2, State: lb.BackendTerminating,
		}.WithPortNames("http").WithTopologyHints([]string{"z1"}, []string{"n1"})
	}
	a, b := base(), base()
	if !a.Equal(&b) {
		t.Fatal("equal backends built separately are not Equal")
	}
	for _, mutate := range []func(*lb.BackendParams){
		func(p *lb.BackendParams) { p.Address = p.Address.WithPort(81) },
		func(p *lb.BackendParams) { *p = p.WithPortNames() },
		func(p *lb.BackendParams) { p.Weight = 4 },
		func(p *lb.BackendParams) { p.NodeName = "n2" },
		func(p *lb.BackendParams) { p.Zone = "z2" },
		func(p *lb.BackendParams) { *p = p.WithTopologyHints([]string{"z2"}, p.ForNodes()) },
		func(p *lb.BackendParams) { *p = p.WithTopologyHints(p.ForZones(), []string{"n1", "n2"}) },
		func(p *lb.BackendParams) { p.ClusterID = 0 },
		func(p *lb.BackendParams) { p.State = lb.BackendActive },
	} {
		c := base()
		mutate(&c)
		if a.Equal(&c) || c.Equal(&a) {
			t.Errorf("Equal ignores a change: %+v", c)
		}
	}
}

func TestMatchesPort(t *testing.T) {
	backend := func(addr string, names ...string) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr)}.WithPortNames(names...)
	}
	tests := []struct {
		b        lb.BackendParams
		portName string
		proto    lb.Protocol
		want     bool
	}{
		{backend("10.0.0.1:80/TCP", "http"), "http", lb.ProtoTCP, true},
		{backend("10.0.0.1:80/TCP", "http", "web"), "web", lb.ProtoTCP, true},
		{backend("10.0.0.1:80/TCP", "http"), "https", lb.ProtoTCP, false},
		{backend("10.0.0.1:80/TCP", "http"), "", lb.ProtoTCP, false},
		{backend("10.0.0.1:80/TCP"), "http", lb.ProtoTCP, true},
		{backend("10.0.0.1:80/TCP"), "", lb.ProtoTCP, true},
		{backend("10.0.0.1:80/TCP"), "", lb.ProtoUDP, false},
		{backend("10.0.0.1:80/TCP", "http"), "http", lb.ProtoUDP, false},
		{backend("10.0.0.1:80/SCTP", "http"), "http", lb.ProtoTCP, false},
		{backend("10.0.0.1:80/TCP", "http"), "http", lb.ProtoAny, true},
		{backend("10.0.0.1:80/ANY", "http"), "http", lb.ProtoUDP, true},
		{backend("10.0.0.1:80/ANY"), "x", lb.ProtoSCTP, true},
		{backend("10.0.0.1:80/ANY", "http"), "dns", lb.ProtoAny, false},
	}
	for _, tt := range tests {
		if got := tt.b.MatchesPort(tt.portName, tt.proto); got != tt.want {
			t.Errorf("%v %v.MatchesPort(%q, %v) = %v, want %v",
				tt.b.Address, tt.b.PortNames(), tt.portName, tt.proto, got, tt.want)
		}
	}
}

var (
	svcA = lb.NewServiceName("default", "a")
	svcB = lb.NewServiceName("default", "b")
	svcC = lb.NewServiceName("other", "a").WithCluster("c2")
)

func inst(svc lb.ServiceName, src lb.Source, weight uint16) lb.BackendInstance {
	return lb.BackendInstance{
		Service: svc, Source: src,
		Params: lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: weight},
	}
}

type instKey struct {
	svc string
	src lb.Source
	w   uint16
}

func instKeys(b *lb.Backend) []instKey {
	var out []instKey
	for _, i := range b.Instances {
		out = append(out, instKey{i.Service.String(), i.Source, i.Params.Weight})
	}
	return out
}

// buildBackend adds the instances one by one with WithInstance.
func buildBackend(insts ...lb.BackendInstance) *lb.Backend {
	b := &lb.Backend{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP")}
	for _, i := range insts {
		b = b.WithInstance(i)
	}
	return b
}

func TestBackendWithInstance(t *testing.T) {
	b := buildBackend(
		inst(svcB, lb.SourceK8s, 1),
		inst(svcA, lb.SourceKVStore, 2),
		inst(svcC, lb.SourceAPI, 3),
		inst(svcA, lb.SourceAPI, 4),
		inst(svcB, lb.SourceFile, 5),
		inst(svcA, lb.SourceK8s, 6),
		inst(svcB, lb.SourceRedirect, 7),
	)
	want := []instKey{
		{"c2/other/a", lb.SourceAPI, 3},
		{"default/a", lb.SourceAPI, 4},
		{"default/a", lb.SourceK8s, 6},
		{"default/a", lb.SourceKVStore, 2},
		{"default/b", lb.SourceFile, 5},
		{"default/b", lb.SourceK8s, 1},
		{"default/b", lb.SourceRedirect, 7},
	}
	if got := instKeys(b); !slices.Equal(got, want) {
		t.Fatalf("Instances = %v\nwant %v", got, want)
	}

	// Replacing keeps the position and the count.
	b2 := b.WithInstance(inst(svcA, lb.SourceK8s, 60))
	want[2].w = 60
	if got := instKeys(b2); !slices.Equal(got, want) {
		t.Errorf("after replace, Instances = %v\nwant %v", got, want)
	}
	if b2.Address != b.Address {
		t.Errorf("WithInstance changed the address to %v", b2.Address)
	}
}

func TestBackendInstanceLookup(t *testing.T) {
	b := buildBackend(
		inst(svcA, lb.SourceKVStore, 1),
		inst(svcA, lb.SourceK8s, 2),
		inst(svcB, lb.SourceRedirect, 3),
		inst(svcC, lb.SourceFile, 4),
	)
	for _, tt := range []struct {
		svc   lb.ServiceName
		src   lb.Source
		found bool
		w     uint16
	}{
		{svcA, lb.SourceKVStore, true, 1},
		{svcA, lb.SourceK8s, true, 2},
		{svcB, lb.SourceRedirect, true, 3},
		{svcC, lb.SourceFile, true, 4},
		{svcA, lb.SourceAPI, false, 0},
		{svcB, lb.SourceK8s, false, 0},
		{lb.NewServiceName("default", "z"), lb.SourceK8s, false, 0},
	} {
		got, ok := b.Instance(tt.svc, tt.src)
		if ok != tt.found || (ok && (got.Service != tt.svc || got.Source != tt.src || got.Params.Weight != tt.w)) {
			t.Errorf("Instance(%v, %v) = %+v, %v", tt.svc, tt.src, got, ok)
		}
	}

	for _, tt := range []struct {
		svc lb.ServiceName
		src lb.Source
	}{{svcA, lb.SourceK8s}, {svcB, lb.SourceRedirect}, {svcC, lb.SourceFile}} {
		got, ok := b.ForService(tt.svc)
		if !ok || got.Service != tt.svc || got.Source != tt.src {
			t.Errorf("ForService(%v) = %+v, %v; want source %v", tt.svc, got, ok, tt.src)
		}
	}
	if got, ok := b.ForService(lb.NewServiceName("default", "z")); ok {
		t.Errorf("ForService(unknown) = %+v", got)
	}
	b = b.WithInstance(inst(svcA, lb.SourceAPI, 9))
	if got, ok := b.ForService(svcA); !ok || got.Source != lb.SourceAPI || got.Params.Weight != 9 {
		t.Errorf("ForService after adding api = %+v, %v", got, ok)
	}
}

func TestBackendServices(t *testing.T) {
	if got := (&lb.Backend{}).Services(); len(got) != 0 {
		t.Errorf("Services() of empty backend = %v", got)
	}
	b := buildBackend(
		inst(svcB, lb.SourceK8s, 1), inst(svcA, lb.SourceK8s, 1), inst(svcB, lb.SourceAPI, 1),
		inst(svcC, lb.SourceK8s, 1), inst(svcA, lb.SourceFile, 1), inst(svcB, lb.SourceKVStore, 1),
	)
	want := []lb.ServiceName{svcC, svcA, svcB}
	if got := b.Services(); !slices.Equal(got, want) {
		t.Errorf("Services() = %v, want %v", got, want)
	}
}

func TestBackendWithout(t *testing.T) {
	b := buildBackend(
		inst(svcA, lb.SourceK8s, 1), inst(svcA, lb.SourceAPI, 2),
		inst(svcB, lb.SourceK8s, 3), inst(svcC, lb.SourceK8s, 4),
	)
	before := instKeys(b)
	c := b.Without(func(i *lb.BackendInstance) bool { return i.Source == lb.SourceK8s })
	want := []instKey{{"default/a", lb.SourceAPI, 2}}
	if got := instKeys(c); !slices.Equal(got, want) {
		t.Errorf("Without(k8s) = %v, want %v", got, want)
	}
	if got := instKeys(b); !slices.Equal(got, before) {
		t.Errorf("Without modified its receiver: %v, was %v", got, before)
	}
	if d := b.Without(func(*lb.BackendInstance) bool { return false }); !slices.Equal(instKeys(d), before) {
		t.Errorf("Without(nothing) = %v", instKeys(d))
	}
	if d := b.Without(func(*lb.BackendInstance) bool { return true }); len(d.Instances) != 0 || len(d.Services()) != 0 {
		t.Errorf("Without(everything) = %v", instKeys(d))
	}
}

func TestBackendImmutability(t *testing.T) {
	// A receiver whose slice has spare capacity: an in-place insert would
	// show in the original array.
	insts := make([]lb.BackendInstance, 0, 16)
	insts = append(insts, inst(svcA, lb.SourceAPI, 1), inst(svcB, lb.SourceK8s, 2), inst(svcC, lb.SourceK8s, 3))
	// Sort as WithInstance would.
	b := buildBackend(insts...)
	b.Instances = append(insts[:0], b.Instances...)
	snapshot := slices.Clone(b.Instances[:cap(b.Instances)])

	unchanged := func(op string) {
		t.Helper()
		if !slices.EqualFunc(b.Instances[:cap(b.Instances)], snapshot, func(x, y lb.BackendInstance) bool {
			return x.Service == y.Service && x.Source == y.Source && x.Params.Equal(&y.Params)
		}) {
			t.Errorf("%s modified the receiver's slice: %v", op, instKeys(b))
		}
	}

	c := b.WithInstance(inst(svcA, lb.SourceK8s, 9)) // insert in the middle
	unchanged("WithInstance insert")
	c.Instances[0].Params.Weight = 99
	unchanged("writing to the copy")

	b.WithInstance(inst(svcB, lb.SourceK8s, 9)) // replace
	unchanged("WithInstance replace")

	b.WithInstance(lb.BackendInstance{Service: lb.NewServiceName("zzz", "z"), Source: lb.SourceAPI}) // append
	unchanged("WithInstance append")

	b.Without(func(i *lb.BackendInstance) bool { return i.Service == svcA })
	unchanged("Without")

	b.Without(func(i *lb.BackendInstance) bool {
		i.Params.Weight = 1234 // drop gets a pointer; writing through it must not leak
		return false
	})
	unchanged("Without with a writing predicate")
}

// A row with one instance (kept with its instance in one allocation) is
// as immutable as any: replacing, dropping down to one and setting a
// verdict leave the receiver as it was.
func TestBackendWithOneInstanceImmutability(t *testing.T) {
	one := (&lb.Backend{}).WithInstance(inst(svcA, lb.SourceAPI, 1))
	replaced := one.WithInstance(inst(svcA, lb.SourceAPI, 2))
	replaced.Instances[0].Params.Weight = 77
	judged := one.WithVerdict(lb.HealthVerdict{Healthy: false, LastError: "down"})
	judged.Instances[0].Params.Weight = 88
	if got := one.Instances[0].Params.Weight; got != 1 || one.Unhealthy {
		t.Errorf("receiver changed: weight %d, unhealthy %v", got, one.Unhealthy)
	}
	if !judged.Unhealthy || judged.HealthError() != "down" || len(judged.Instances) != 1 {
		t.Errorf("WithVerdict = %+v", judged)
	}
	two := one.WithInstance(inst(svcB, lb.SourceK8s, 3))
	left := two.Without(func(i *lb.BackendInstance) bool { return i.Service == svcA })
	left.Instances[0].Params.Weight = 99
	if got := instKeys(two); len(got) != 2 || two.Instances[1].Params.Weight != 3 {
		t.Errorf("Without changed the receiver: %v, weight %d", got, two.Instances[1].Params.Weight)
	}
	if len(left.Instances) != 1 || left.Instances[0].Service != svcB {
		t.Errorf("Without left %v", instKeys(left))
	}
}

func FuzzBackendParamsJSON(f *testing.F) {
	for _, s := range []string{
		`{"address":"10.0.0.1:8080/TCP"}`,
		`{"address":"10.0.0.1:8080/TCP","weight":0}`,
		`{"address":"[fd00::1]:53/udp","portNames":["dns"],"weight":65535,"nodeName":"n1","zone":"z1",` +
			`"forZones":["z1"],"forNodes":["n1","n2"],"clusterID":4294967295,"state":"quarantined"}`,
		`{"address":"10.0.0.1:80/TCP","portNames":[]}`,
		`{"ADDRESS":"10.0.0.1:80/ANY","Weight":7}`,
		`{"address":"10.0.0.1:80/TCP","wieght":5}`,
		`{"address":"10.0.0.1:80/TCP","weight":70000}`,
		`{"address":"10.0.0.1:80/TCP/i"}`,
		`{"address":"0.0.0.0:80/TCP"}`,
		`{"address":""}`,
		`{"address":"10.0.0.1:80/TCP","portNames":[""]}`,
		`{"address":"10.0.0.1:80/TCP","zone":"\u00e9\ud800"}`,
		`null`, `{}`, `[]`, `"x"`, ``, `{"address":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p lb.BackendParams
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if p.Validate() != nil {
			return
		}
		out, err := json.Marshal(&p)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", p, err)
		}
		var q lb.BackendParams
		if err := json.Unmarshal(out, &q); err != nil {
			t.Fatalf("re-decoding %s (from %q): %v", out, data, err)
		}
		if !p.Equal(&q) {
			t.Fatalf("round trip changed the backend:\nin  %q\nmid %s\ngot %+v\nwant %+v", data, out, q, p)
		}
	})
}

// The backends table's Cluster column lists the remote clusters that
// offer a backend, each once; this cluster's own have none.
func TestBackendTableRowCluster(t *testing.T) {
	addr := lb.MustParseL3n4Addr("10.2.0.1:80/TCP")
	inst := func(svc string, cluster uint32) lb.BackendInstance {
		return lb.BackendInstance{Service: lb.NewServiceName("shop", svc), Source: lb.SourceKVStore, Params: lb.BackendParams{Address: addr, Weight: 100, ClusterID: cluster}}
	}
	for _, tc := range []struct {
		insts []lb.BackendInstance
		want  string
	}{
		{[]lb.BackendInstance{{Service: lb.NewServiceName("shop", "web"), Source: lb.SourceK8s, Params: lb.BackendParams{Address: addr, Weight: 100}}}, ""},
		{[]lb.BackendInstance{inst("a", 3), inst("b", 2), inst("c", 3)}, "2,3"},
	} {
		b := &lb.Backend{Address: addr, Instances: tc.insts}
		if got := b.TableRow()[slices.Index(b.TableHeader(), "Cluster")]; got != tc.want {
			t.Errorf("Cluster column %q, want %q", got, tc.want)
		}
	}
}

// Port names and hints are copied from the caller's lists, and params
// with equal lists share one copy: giving a backend port names that others
// have costs no allocation.
func TestBackendParamsShareEqualHints(t *testing.T) {
	names := []string{"http", "metrics"}
	base := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 1}
	a := base.WithPortNames(names...)
	names[0] = "dns"
	if got := a.PortNames(); !slices.Equal(got, []string{"http", "metrics"}) {
		t.Errorf("port names %v changed with the caller's list", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { a = base.WithPortNames("http", "metrics") }); allocs != 0 {
		t.Errorf("WithPortNames of known names: %v allocations, want 0", allocs)
	}
	// Names with the key's separators in them are not confused.
	x := base.WithPortNames("a\x01", "b")
	y := base.WithPortNames("a", "\x01b")
	if slices.Equal(x.PortNames(), y.PortNames()) {
		t.Errorf("distinct lists %q and %q read back equal", x.PortNames(), y.PortNames())
	}
}
