package file

import (
	"slices"
	"strings"
	"testing"
)

const serviceDoc = `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.0.1
  ports:
  - {port: 80}
`

// A manifest is decoded as `kubectl apply --validate` would check it: a
// misspelt field or value is an error naming the file, the line, the
// object and the field, and the object's document is rejected alone;
// documents of kinds lbstate does not read (a Deployment, a CRD's) are
// skipped without an error. Misspelt fields once made a service vanish
// silently, misspelt values fell back to defaults, and one CRD in a file
// dropped the file's Services.
func TestManifestsAreDecodedStrictly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		objects []string // the valid objects, as kind/namespace/name
		invalid []string // the rejected ones, whose last valid version stays
		unknown bool     // a document lbstate cannot even name
		errs    []string
		skipped []string
	}{
		{name: "valid", yaml: serviceDoc, objects: []string{"Service/default/web"}},
		{name: "CRD and Deployment beside a Service",
			yaml:    "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n" + serviceDoc + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			objects: []string{"Service/default/web"}, skipped: []string{"example.com/v1 Widget", "apps/v1 Deployment"}},
		{name: "misspelt fields",
			yaml:    strings.Replace(strings.Replace(serviceDoc, "clusterIP", "clusterIp", 1), "{port: 80}", "{port: 80, prots: TCP}", 1),
			invalid: []string{"Service/default/web"},
			errs:    []string{`f.yaml:5: service default/web: spec.clusterIp: unknown field`, `f.yaml:7: service default/web: spec.ports[0].prots: unknown field`}},
		{name: "a field twice",
			yaml:    serviceDoc + "  type: ClusterIP\n  type: NodePort\n",
			invalid: []string{"Service/default/web"},
			errs:    []string{`f.yaml:9: service default/web: key "type" already set in map`}},
		{name: "misspelt values",
			yaml:    serviceDoc + "  externalTrafficPolicy: Locl\n  sessionAffinity: ClientIp\n  ipFamilies: [IPv4, ipv6]\n",
			invalid: []string{"Service/default/web"},
			errs: []string{`f.yaml:8: service default/web: spec.externalTrafficPolicy: unsupported value "Locl" (want Cluster or Local)`,
				`f.yaml:9: service default/web: spec.sessionAffinity: unsupported value "ClientIp" (want None or ClientIP)`,
				`f.yaml:10: service default/web: spec.ipFamilies[1]: unsupported value "ipv6" (want IPv4 or IPv6)`}},
		{name: "misspelt protocol and address type of a slice, in the second document",
			yaml:    serviceDoc + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  labels: {kubernetes.io/service-name: web}\naddressType: ipv4\nports: [{port: 8080, protocol: tcp}]\n",
			objects: []string{"Service/default/web"}, invalid: []string{"EndpointSlice/default/web-1"},
			errs: []string{`f.yaml:14: endpointslice default/web-1: addressType: unsupported value "ipv4" (want IPv4, IPv6 or FQDN)`,
				`f.yaml:15: endpointslice default/web-1: ports[0].protocol: unsupported value "tcp" (want TCP, UDP or SCTP)`}},
		{name: "a value of the wrong type",
			yaml:    strings.Replace(serviceDoc, "{port: 80}", "{port: eighty}", 1),
			invalid: []string{"Service/default/web"},
			errs:    []string{`f.yaml:1: service default/web: json: cannot unmarshal string into Go struct field`}},
		{name: "misspelt kind", yaml: strings.Replace(serviceDoc, "kind: Service", "kind: Servce", 1), unknown: true,
			errs: []string{`f.yaml:1: kind "Servce" is not a kind of v1`}},
		{name: "a kind lbstate reads, in another version",
			yaml:    "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: s, namespace: ns}\naddressType: IPv4\n",
			invalid: []string{"EndpointSlice/ns/s"},
			errs:    []string{`f.yaml:1: endpointslice ns/s: apiVersion discovery.k8s.io/v1beta1: lbstate reads EndpointSlice in discovery.k8s.io/v1`}},
		{name: "no name", yaml: strings.Replace(serviceDoc, "metadata: {name: web}", "metadata: {labels: {a: b}}", 1), unknown: true,
			errs: []string{`f.yaml:3: service: metadata.name: missing`}},
		{name: "no kind", yaml: "apiVersion: v1\nmetadata: {name: a}\n", unknown: true, errs: []string{`f.yaml:1: kind: missing`}},
		{name: "no apiVersion", yaml: "kind: Service\nmetadata: {name: a}\n", unknown: true, errs: []string{`f.yaml:1: apiVersion: missing`}},
		{name: "an object twice: the first stays", yaml: serviceDoc + "---\n" + strings.Replace(serviceDoc, "10.96.0.1", "10.96.0.2", 1),
			objects: []string{"Service/default/web"}, errs: []string{`f.yaml:9: service default/web: defined earlier in this file too, which wins`}},
		{name: "broken YAML in the second document",
			yaml:    serviceDoc + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n  labels: [oops\n",
			objects: []string{"Service/default/web"}, unknown: true,
			errs: []string{`f.yaml:13: `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeManifest("f.yaml", []byte(tc.yaml))
			var objects, invalid []string
			for key := range m.objs {
				objects = append(objects, key.kind+"/"+key.namespace+"/"+key.name)
			}
			for _, key := range m.invalid {
				invalid = append(invalid, key.kind+"/"+key.namespace+"/"+key.name)
			}
			var errs []string
			for _, err := range m.errs {
				errs = append(errs, err.Error())
			}
			slices.Sort(objects)
			if !slices.Equal(objects, tc.objects) || !slices.Equal(invalid, tc.invalid) || m.unknown != tc.unknown || !slices.Equal(m.skipped, tc.skipped) {
				t.Errorf("objects %q, invalid %q, unknown %v, skipped %q\nwant    %q, %q, %v, %q", objects, invalid, m.unknown, m.skipped, tc.objects, tc.invalid, tc.unknown, tc.skipped)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors:\n  %s\nwant:\n  %s", strings.Join(errs, "\n  "), strings.Join(tc.errs, "\n  "))
			}
			for i, want := range tc.errs {
				if !strings.HasPrefix(errs[i], want) {
					t.Errorf("error %d: %s\nwant it to start with %s", i, errs[i], want)
				}
			}
		})
	}
}
