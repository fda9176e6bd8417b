package kubeapi

import (
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// slimCRD keeps what a kind's watch needs of a CRD, from a real manifest
// (ours, with the status an API server adds) and from odd ones, which
// read as not served rather than fail.
func TestSlimCRDKeepsServedVersionsAndEstablished(t *testing.T) {
	data, err := os.ReadFile("../redirectpolicy/crd/ciliumlocalredirectpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]any{}
	if err := yaml.Unmarshal(data, &shipped); err != nil {
		t.Fatal(err)
	}
	established := func(obj map[string]any, status string) map[string]any {
		obj = (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
		obj["status"] = map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": status},
		}}
		return obj
	}
	clrp := schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumlocalredirectpolicies"}
	for _, c := range []struct {
		name        string
		obj         map[string]any
		served      []string
		established bool
		watch       string // the version of [v3, v2] watched, "" for none
	}{
		{"shipped, established", established(shipped, "True"), []string{"v2"}, true, "v2"},
		{"shipped, not yet established", established(shipped, "False"), []string{"v2"}, false, ""},
		{"shipped, no status", shipped, []string{"v2"}, false, ""},
		{"a version not served", established(map[string]any{"metadata": map[string]any{"name": "x"}, "spec": map[string]any{
			"versions": []any{map[string]any{"name": "v3", "served": false}, map[string]any{"name": "v2", "served": true}}}}, "True"),
			[]string{"v2"}, true, "v2"},
		{"versions not a list", established(map[string]any{"spec": map[string]any{"versions": "v2"}}, "True"), nil, true, ""},
		{"a condition not a map", map[string]any{"status": map[string]any{"conditions": []any{"Established"}}}, nil, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj, err := slimCRD(&unstructured.Unstructured{Object: c.obj})
			if err != nil {
				t.Fatal(err)
			}
			cr := obj.(*crd)
			if !slices.Equal(cr.Served, c.served) || cr.Established != c.established {
				t.Errorf("served %v, established %v; want %v, %v", cr.Served, cr.Established, c.served, c.established)
			}
			v3 := clrp
			v3.Version = "v3"
			gvr, ok := cr.serves([]schema.GroupVersionResource{v3, clrp})
			if got := map[bool]string{true: gvr.Version}[ok]; got != c.watch {
				t.Errorf("watching %q, want %q", got, c.watch)
			}
			if again, _ := slimCRD(cr); again != cr {
				t.Error("a second transform changed the object")
			}
		})
	}
}
