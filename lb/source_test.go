package lb_test

import (
	"encoding/json"
	"slices"
	"testing"
	"unsafe"

	"github.com/lbstate/lbstate/lb"
)

// The sources these tests register sit outside the built-ins' range
// (100-500), so that the list of registered names other tests expect
// keeps the built-ins together.

func TestRegisterSourceIsIdempotentForTheSameNameAndPriority(t *testing.T) {
	a, err := lb.RegisterSource("lbtest-same", 40)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lb.RegisterSource("lbtest-same", 40)
	if err != nil || b != a {
		t.Fatalf("second RegisterSource = %v, %v; want %v, nil", b, err, a)
	}
	if a.Priority() != 40 || a.String() != "lbtest-same" || !a.Valid() {
		t.Errorf("source %v: priority %d, valid %v", a, a.Priority(), a.Valid())
	}
}

func TestRegisterSourceRefusesAConflictNamingBoth(t *testing.T) {
	lb.MustRegisterSource("lbtest-held", 41)
	_, err := lb.RegisterSource("lbtest-held", 42)
	wantErr(t, err, `source "lbtest-held"`, "priority 42", "already registered with priority 41")

	_, err = lb.RegisterSource("lbtest-other", 41)
	wantErr(t, err, `source "lbtest-other"`, "priority 41", `already held by source "lbtest-held"`)

	_, err = lb.RegisterSource("lbtest-mine", uint16(lb.SourceK8s))
	wantErr(t, err, `source "lbtest-mine"`, `already held by source "k8s"`)
	if _, err := lb.ParseSource("lbtest-other"); err == nil {
		t.Error("a refused source was registered")
	}
}

func TestRegisterSourceRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "Static", "1st", "-a", "a-", "a_b", "a b", "a.b", string(make([]byte, 64))} {
		_, err := lb.RegisterSource(name, 43)
		wantErr(t, err, "source name", "DNS label")
	}
	_, err := lb.RegisterSource("lbtest-zero", 0)
	wantErr(t, err, `source "lbtest-zero"`, "priority 0")
}

func TestRegisteredSourcesRoundTripAsText(t *testing.T) {
	low := lb.MustRegisterSource("lbtest-low", 44)
	high := lb.MustRegisterSource("lbtest-high", 600)
	for _, src := range []lb.Source{low, high, lb.SourceK8s} {
		text, err := json.Marshal(lb.Redirect{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		var back lb.Redirect
		if err := json.Unmarshal(text, &back); err != nil || back.Source != src {
			t.Errorf("%s: decoded %v, %v; want %v", text, back.Source, err, src)
		}
	}
	var src lb.Source
	err := src.UnmarshalText([]byte("lbtest-never"))
	wantErr(t, err, `unknown source "lbtest-never"`, "lbtest-high, api, file, k8s, kvstore, redirect, lbtest-low")

	if !high.Outranks(lb.SourceAPI) || !lb.SourceRedirect.Outranks(low) || low.Outranks(lb.SourceRedirect) {
		t.Error("registered sources do not rank by priority among the built-ins")
	}
	all := lb.Sources()
	if i, j := slices.Index(all, high), slices.Index(all, lb.SourceAPI); i < 0 || i > j {
		t.Errorf("Sources() = %v: want %v before api", all, high)
	}
}

// Every row carries a source, and rows are memory-benchmarked: it stays
// as small as a priority.
func TestSourceFitsTwoBytes(t *testing.T) {
	if n := unsafe.Sizeof(lb.Source(0)); n > 2 {
		t.Errorf("Source is %d bytes", n)
	}
}
