package datapath_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// scrapeSeries scrapes the agent once and returns the samples of each
// metric family, by their labels written as name=value pairs in label
// order.
func (a *agent) scrapeSeries() map[string]map[string]float64 {
	a.t.Helper()
	families, err := a.registry.Gather()
	if err != nil {
		a.t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range families {
		series := map[string]float64{}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			series[strings.Join(labels, " ")] = m.GetCounter().GetValue()
		}
		out[f.GetName()] = series
	}
	return out
}

// Traffic the datapath counts shows as lbstate_backend_* series per
// frontend and backend, and drops as lbstate_frontend_drops_total by
// reason; a backend the frontend no longer uses, or a frontend that is
// gone, is exported once more with its last values and then no more, and
// its map entries are gone.
func TestMetricsCountTrafficPerBackendAndForgetGoneOnes(t *testing.T) {
	maps := kernelMaps(t, 251)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	defer a.stop()
	a.service("web", lb.AlgorithmRandom, []string{"10.96.0.1:80/TCP"}, be("10.1.0.1:8080/TCP", 100), be("10.1.0.2:8080/TCP", 100))
	a.service("empty", lb.AlgorithmRandom, []string{"10.96.0.2:80/TCP"})
	dp := loadDatapath(t, maps)

	to := map[string]int{}
	for port := 40000; port < 40020; port++ {
		f := bpftest.NewFlow(fmt.Sprintf("192.0.2.1:%d", port), "10.96.0.1:80", lb.ProtoTCP)
		_, out := bpftest.Send(t, dp.Program("lb_tc_ingress"), f)
		bpftest.Send(t, dp.Program("lb_tc_egress"), out.Reply())
		to[out.Dst.String()]++
	}
	for range 3 {
		bpftest.Send(t, dp.Program("lb_tc_ingress"), bpftest.NewFlow("192.0.2.1:50000", "10.96.0.2:80", lb.ProtoTCP))
	}
	size := float64(len(bpftest.Packet(t, bpftest.NewFlow("192.0.2.1:1", "10.96.0.1:80", lb.ProtoTCP), 32)))
	labels := func(backend string) string {
		return "backend=" + backend + "/TCP backend_cluster=0 frontend=10.96.0.1:80/TCP route= service_name=web service_namespace=test"
	}
	scrape := a.scrapeSeries()
	for _, b := range []string{"10.1.0.1:8080", "10.1.0.2:8080"} {
		n := float64(to[b])
		for name, want := range map[string]float64{
			"lbstate_backend_flows_total":   n,
			"lbstate_backend_packets_total": 2 * n,
			"lbstate_backend_bytes_total":   2 * n * size,
		} {
			if got, ok := scrape[name][labels(b)]; !ok || got != want {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, labels(b), got, ok, want)
			}
		}
	}
	dropLabels := "frontend=10.96.0.2:80/TCP reason=no-backend service_name=empty service_namespace=test"
	if got := scrape["lbstate_frontend_drops_total"]; got[dropLabels] != 3 {
		t.Errorf("drops: %v, want 3 for %s", got, dropLabels)
	}

	a.service("web", lb.AlgorithmRandom, []string{"10.96.0.1:80/TCP"}, be("10.1.0.1:8080/TCP", 100))
	a.write(func(txn statedb.WriteTxn) error {
		return a.w.DeleteService(txn, lb.NewServiceName("test", "empty"), lb.SourceK8s)
	})
	scrape = a.scrapeSeries()
	if got := scrape["lbstate_backend_flows_total"]; got[labels("10.1.0.2:8080")] != float64(to["10.1.0.2:8080"]) {
		t.Errorf("after the backend went, the first scrape has %v; want its last value once more", got)
	}
	if got := scrape["lbstate_frontend_drops_total"]; got[dropLabels] != 3 {
		t.Errorf("after the frontend went, the first scrape has %v; want its drops once more", got)
	}
	scrape = a.scrapeSeries()
	flows, drops := scrape["lbstate_backend_flows_total"], scrape["lbstate_frontend_drops_total"]
	if _, ok := flows[labels("10.1.0.2:8080")]; ok || len(drops) != 0 {
		t.Errorf("the second scrape still has the gone series: %v, %v", flows, drops)
	}
	if _, ok := flows[labels("10.1.0.1:8080")]; !ok {
		t.Errorf("the backend still in use lost its series: %v", flows)
	}
	var keys []bpf.CounterKey
	maps.Counters.Iterate(func(k bpf.CounterKey, _ []bpf.CounterValue) bool { keys = append(keys, k); return true })
	if web := a.frontend("10.96.0.1:80/TCP").ID; len(keys) != 1 || keys[0].RevNatID != web || slices.Contains(keys, bpf.CounterKey{}) {
		t.Errorf("lb_counters holds %v, want only the remaining backend of frontend %d", keys, web)
	}
}

// A drop the datapath ties to no frontend (ID 0: a master rewritten
// under every read of it, a fragment without its first one) is exported
// as the node's, without service labels, and kept from scrape to scrape:
// the collector once deleted it as a gone frontend's, unseen.
func TestMetricsExportDropsOfNoFrontendAsTheNodes(t *testing.T) {
	maps := kernelMaps(t, 251)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	defer a.stop()
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	perCPU := make([]uint64, cpus)
	perCPU[0] = 2
	if err := maps.Drops.Update(bpf.DropKey{RevNatID: 0, Reason: bpf.DropTornMaster}, perCPU); err != nil {
		t.Fatal(err)
	}
	const labels = "frontend= reason=torn-master service_name= service_namespace="
	for scrape := range 2 {
		if got := a.scrapeSeries()["lbstate_frontend_drops_total"]; got[labels] != 2 {
			t.Errorf("scrape %d: drops %v, want 2 for %s", scrape+1, got, labels)
		}
	}
}
