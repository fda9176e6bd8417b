package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/tables"
)

// -topology: services with topology keys (hostname, zone, region, "*")
// whose backends are spread over nodes in 3 regions x 3 zones, and the
// cost of relabelling one node (moving it into this node's zone and back):
// from the hand-over of its metadata until every frontend it re-selects
// is in the maps.

const (
	topologyNodes = 1000
	zoneLabel     = "topology.kubernetes.io/zone"
	regionLabel   = "topology.kubernetes.io/region"
)

type topologyResult struct {
	Maps                string  `json:"maps"`
	Services            int     `json:"services"`
	BackendsPerService  int     `json:"backends_per_service"`
	Nodes               int     `json:"nodes"`
	NodeLabelsBytesNode float64 `json:"node_labels_bytes_per_node"`
	Relabels            int     `json:"relabels"`
	FrontendsPerRelabel float64 `json:"frontends_per_relabel"`
	RelabelP50Ms        float64 `json:"relabel_p50_ms"`
	RelabelP99Ms        float64 `json:"relabel_p99_ms"`
	RelabelMaxMs        float64 `json:"relabel_max_ms"`
}

// nodeLabels are node i's labels: region i%3, zone i/3%3 of it; moved
// puts it in region 0, zone 0, where this node is.
func nodeLabels(i int, moved bool) map[string]string {
	region, zone := i%3, i/3%3
	if moved {
		region, zone = 0, 0
	}
	return map[string]string{
		regionLabel:               fmt.Sprintf("region-%d", region),
		zoneLabel:                 fmt.Sprintf("region-%d-zone-%d", region, zone),
		"kubernetes.io/arch":      "amd64",
		"kubernetes.io/os":        "linux",
		"node.kubernetes.io/role": "worker",
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

func runTopology(o options, out io.Writer) error {
	if o.services < 1 || o.backends < 1 || o.updates < 1 {
		return fmt.Errorf("-topology needs -services, -backends and -updates of at least 1")
	}
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	res := topologyResult{Maps: b.maps.Kind, Services: o.services, BackendsPerService: o.backends, Nodes: topologyNodes}
	fmt.Fprintf(out, "lbbench -topology: %d services x %d backends over %d nodes in 3 regions x 3 zones, %s maps\n",
		o.services, o.backends, topologyNodes, b.maps.Kind)

	// This node, in region 0, zone 0; then every node's labels.
	local := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-node", Labels: nodeLabels(0, false)}}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.refl.Push(local, false)
	for i := range topologyNodes {
		b.refl.Push(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: nodeLabels(i, false)}}, false)
	}
	for b.w.NodeLabels().NumObjects(b.db.ReadTxn()) < topologyNodes+1 {
		time.Sleep(time.Millisecond)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	res.NodeLabelsBytesNode = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (topologyNodes + 1)

	start := time.Now()
	for i := range o.services {
		svc, es := objects(i, o.backends, 0)
		svc.Annotations = map[string]string{k8s.AnnotationTopologyKeys: "kubernetes.io/hostname,topology.kubernetes.io/zone,topology.kubernetes.io/region,*"}
		spreadOverNodes(es, i, o.backends)
		b.refl.Push(svc, false)
		b.refl.Push(es, false)
	}
	if err := b.settle(o.services, o.services*o.backends); err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded in %s; node labels: %.0f bytes per node in the tables\n", time.Since(start).Round(time.Millisecond), res.NodeLabelsBytesNode)

	stopProfile, err := startCPUProfile(o.cpuProfile) // of the relabels alone
	if err != nil {
		return err
	}
	defer stopProfile()
	var lat []time.Duration
	changed := 0
	for u := range o.updates {
		n := (u * 7919) % topologyNodes
		moved := u/topologyNodes%2 == 0 // into our zone, and back on the next pass
		labels := nodeLabels(n, moved)
		revBefore := b.frontends.Revision(b.db.ReadTxn())
		t0 := time.Now()
		b.refl.Push(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: nodeName(n), Labels: labels}}, false)
		for {
			row, _, watch, _ := b.w.NodeLabels().GetWatch(b.db.ReadTxn(), tables.NodeLabelsByName.Query(nodeName(n)))
			if row.Is(labels) {
				break
			}
			<-watch
		}
		txn := b.db.ReadTxn()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := lbreconciler.WaitReconciled(ctx, b.rec, b.frontends.Revision(txn))
		cancel()
		if err != nil {
			return fmt.Errorf("relabel %d of %s: %w", u, nodeName(n), err)
		}
		lat = append(lat, time.Since(t0))
		for range b.frontends.LowerBound(b.db.ReadTxn(), statedb.ByRevision[*lb.Frontend](revBefore+1)) {
			changed++ // re-selected (and then marked reconciled)
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.Relabels = len(lat)
	res.FrontendsPerRelabel = float64(changed) / float64(len(lat))
	res.RelabelP50Ms, res.RelabelP99Ms, res.RelabelMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	fmt.Fprintf(out, "relabel of one node, hand-over to maps: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d relabels (%.0f frontends re-selected each)\n",
		res.RelabelP50Ms, res.RelabelP99Ms, res.RelabelMaxMs, res.Relabels, res.FrontendsPerRelabel)
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}

// spreadOverNodes puts service i's endpoints on consecutive nodes, so
// that each node has backends of many services.
func spreadOverNodes(es *discoveryv1.EndpointSlice, i, backends int) {
	for j := range es.Endpoints {
		node := nodeName((i*backends + j) % topologyNodes)
		es.Endpoints[j].NodeName = &node
	}
}

// topologyDefaults sizes -topology as the issue asks (10,000 services x
// 10 backends) unless -services or -backends say otherwise.
func topologyDefaults(o *options) {
	if !o.given["services"] {
		o.services = 10000
	}
	if !o.given["backends"] {
		o.backends = 10
	}
}
