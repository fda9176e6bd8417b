package main

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/bpf"
)

// lbbench reads its flags with pflag, as lbctl and the agent do: long
// names with two dashes, and, for the command lines saved from its Go
// flag days, with one.
func TestBenchFlagsTakeTwoDashesAndTheOldOneDashSpelling(t *testing.T) {
	two, err := parseOptions([]string{"--services", "10", "--maps=memory", "--json", "--health-interval", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	one, err := parseOptions([]string{"-services", "10", "-maps=memory", "-json", "-health-interval", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if two.services != 10 || two.maps != "memory" || !two.json || two.health.interval.String() != "2s" || two.backends != 1 {
		t.Errorf("parsed %+v", two)
	}
	if !reflect.DeepEqual(one, two) {
		t.Errorf("one dash: %+v\ntwo dashes: %+v", one, two)
	}
	if !two.given["services"] || two.given["backends"] {
		t.Errorf("given %v, want services and not backends", two.given)
	}
}

// A mode's sizes yield to the sizes given on the command line.
func TestBenchModeDefaultsYieldToGivenFlags(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		services, backends int
	}{
		{[]string{"--topology"}, 10000, 10},
		{[]string{"--topology", "--services", "5"}, 5, 10},
		{[]string{"-topology", "-backends=3"}, 10000, 3},
	} {
		o, err := parseOptions(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		topologyDefaults(&o)
		if o.services != tc.services || o.backends != tc.backends {
			t.Errorf("%v: %d x %d, want %d x %d", tc.args, o.services, o.backends, tc.services, tc.backends)
		}
	}
}

func TestBenchFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sevrices", "10"}, "unknown flag: --sevrices"},
		{[]string{"--services", "ten"}, `invalid argument "ten" for "--services" flag`},
		{[]string{"--json", "extra"}, `unexpected argument "extra"`},
	} {
		if _, err := parseOptions(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	var usage bytes.Buffer
	if _, err := parseOptions([]string{"--help"}, &usage); !errors.Is(err, pflag.ErrHelp) ||
		!strings.Contains(usage.String(), "--services int") || !strings.Contains(usage.String(), "--health-window duration") {
		t.Errorf("--help: %v, usage:\n%s", err, usage.String())
	}
}

// --default-map-sizes runs on the maps an agent given no flag has; without
// it the maps are sized to the run.
func TestBenchDefaultMapSizesKeepTheAgentsDefaults(t *testing.T) {
	for _, c := range []struct {
		args []string
		want uint32
	}{
		{[]string{"--services", "300", "--backends", "3", "--maps", "memory", "--default-map-sizes"}, bpf.DefaultConfig.LBServicesMax},
		{[]string{"--services", "300", "--backends", "3", "--maps", "memory"}, 300*4 + 1024},
	} {
		o, err := parseOptions(c.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newBench(o)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := b.maps.Capacity("lb_services")
		b.stop()
		if got.MaxEntries != int(c.want) {
			t.Errorf("lbbench %s: lb_services of %d entries, want %d", strings.Join(c.args, " "), got.MaxEntries, c.want)
		}
	}
}
