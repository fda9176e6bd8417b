package cilium

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"

	"github.com/cilium/statedb"

	slim_corev1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/api/core/v1"
	slim_discovery_v1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/api/discovery/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/tables"
)

// clusterObjects are one cluster's Services and EndpointSlices in the
// namespace shop; the pods of cluster n have addresses 10.n.0.x and
// fd00:n::x, the ClusterIPs are the same in every cluster.
//
//   - web: global, dual-stack, two named ports, labels and a selector;
//     endpoints ready (with a hostname and a zone hint), terminating but
//     serving, and neither ready nor serving;
//   - api: global by Cilium's older alias, one unnamed port;
//   - local: global but shared "no": takes, never offers;
//   - plain: not global;
//   - db: headless and global.
func clusterObjects(n int) string {
	return strings.ReplaceAll(`
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels: {app: web, tier: front}
  annotations: {service.cilium.io/global: "true"}
spec:
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10, "fd00:96::10"]
  ipFamilies: [IPv4, IPv6]
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
  - {name: dns, port: 53, targetPort: 5353, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-v4
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
- {name: http, port: 8080, protocol: TCP}
- {name: dns, port: 5353, protocol: UDP}
endpoints:
- addresses: [10.{n}.0.1]
  conditions: {ready: true}
  hostname: web-0
  zone: zone-a
  hints: {forZones: [{name: zone-a}]}
- addresses: [10.{n}.0.2]
  conditions: {ready: false, serving: true, terminating: true}
- addresses: [10.{n}.0.3]
  conditions: {ready: false, serving: false}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-v6
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv6
ports:
- {name: http, port: 8080, protocol: TCP}
endpoints:
- addresses: ["fd00:{n}::1"]
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: shop
  annotations: {io.cilium/global-service: "true"}
spec:
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20]
  ports:
  - {port: 9000, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-v4
  namespace: shop
  labels: {kubernetes.io/service-name: api}
addressType: IPv4
ports:
- {port: 9000, protocol: TCP}
endpoints:
- addresses: [10.{n}.0.9]
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata:
  name: local
  namespace: shop
  annotations: {service.cilium.io/global: "true", service.cilium.io/shared: "no"}
spec:
  clusterIP: 10.96.0.30
  clusterIPs: [10.96.0.30]
  ports:
  - {port: 80, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: local-v4
  namespace: shop
  labels: {kubernetes.io/service-name: local}
addressType: IPv4
ports:
- {port: 80, protocol: TCP}
endpoints:
- addresses: [10.{n}.0.30]
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata:
  name: plain
  namespace: shop
spec:
  clusterIP: 10.96.0.40
  clusterIPs: [10.96.0.40]
  ports:
  - {port: 80, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: plain-v4
  namespace: shop
  labels: {kubernetes.io/service-name: plain}
addressType: IPv4
ports:
- {port: 80, protocol: TCP}
endpoints:
- addresses: [10.{n}.0.40]
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata:
  name: db
  namespace: shop
  annotations: {service.cilium.io/global: "true"}
spec:
  clusterIP: None
  ports:
  - {name: pg, port: 5432, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-v4
  namespace: shop
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
ports:
- {name: pg, port: 5432, protocol: TCP}
endpoints:
- addresses: [10.{n}.0.50]
  conditions: {ready: true}
`, "{n}", fmt.Sprint(n))
}

// objects is one cluster's objects, decoded both as Kubernetes' types
// (for lbstate) and as Cilium's slim types (for Cilium), from the same
// YAML.
type objects struct {
	services     []*corev1.Service
	slices       []*discoveryv1.EndpointSlice
	slimServices []*slim_corev1.Service
	slimSlices   []*slim_discovery_v1.EndpointSlice
}

func decodeObjects(t *testing.T, text string) *objects {
	t.Helper()
	o := &objects{}
	for doc := range strings.SplitSeq(text, "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		var into, slim any
		switch kind.Kind {
		case "Service":
			s, ss := &corev1.Service{}, &slim_corev1.Service{}
			o.services, o.slimServices = append(o.services, s), append(o.slimServices, ss)
			into, slim = s, ss
		case "EndpointSlice":
			s, ss := &discoveryv1.EndpointSlice{}, &slim_discovery_v1.EndpointSlice{}
			o.slices, o.slimSlices = append(o.slices, s), append(o.slimSlices, ss)
			into, slim = s, ss
		default:
			t.Fatalf("kind %q", kind.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(doc), slim); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// slicesOf is what Cilium's converter asks for: a service's slices.
func (o *objects) slicesOf(namespace, name string) []*slim_discovery_v1.EndpointSlice {
	var out []*slim_discovery_v1.EndpointSlice
	for _, es := range o.slimSlices {
		if es.Namespace == namespace && es.Labels[slim_discovery_v1.LabelServiceName] == name {
			out = append(out, es)
		}
	}
	return out
}

// lbstateTables declares the objects in lbstate's tables as its
// Kubernetes source converts them.
func lbstateTables(t *testing.T, o *objects) (*statedb.DB, *tables.Writer) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := w.WriteTxn()
	defer txn.Abort()
	for _, svc := range o.services {
		p, ok, _, err := k8s.ConvertService(svc, k8s.ServiceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := w.UpsertService(txn, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, es := range o.slices {
		name, backends, errs, err := k8s.ConvertEndpointSlice(es)
		if err := errorsOf(err, errs); err != nil {
			t.Fatal(err)
		}
		if err := w.UpsertBackends(txn, name, lb.SourceK8s, backends...); err != nil {
			t.Fatal(err)
		}
	}
	txn.Commit()
	return db, w
}

func errorsOf(err error, errs []error) error {
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// selected lists, per frontend of shop/name, the active backends
// selected for it: "10.96.0.10:80/TCP -> 10.1.0.1:8080/TCP(c0),
// 10.2.0.1:8080/TCP(c7)", each with its cluster ID.
func selected(db *statedb.DB, w *tables.Writer, name string) []string {
	var out []string
	for fe := range w.FrontendsOf(db.ReadTxn(), lb.NewServiceName("shop", name)) {
		var bs []string
		for _, b := range fe.Backends {
			if b.State == lb.BackendActive {
				bs = append(bs, fmt.Sprintf("%s(c%d)", b.Address, b.ClusterID))
			}
		}
		slices.Sort(bs)
		out = append(out, fe.Address.String()+" -> "+strings.Join(bs, ","))
	}
	slices.Sort(out)
	return out
}
