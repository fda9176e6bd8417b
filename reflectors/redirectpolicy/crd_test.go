package redirectpolicy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The CRD we ship declares every field of our types, with the type the
// JSON decoding of Policy needs, and nothing we do not read: a field
// missing from it would be pruned by the API server and silently lost.
func TestShippedCRDSchemaMatchesTheTypes(t *testing.T) {
	data, err := os.ReadFile("crd/ciliumlocalredirectpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Group    string
			Names    struct{ Kind, Plural string }
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != Group || crd.Spec.Names.Kind != Kind || crd.Spec.Names.Plural != Resource.Resource ||
		len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != Version {
		t.Fatalf("CRD names %+v, want %s %s/%s", crd.Spec, Resource, Group, Kind)
	}
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema["properties"].(map[string]any)
	checkSchema(t, "spec", props["spec"].(map[string]any), reflect.TypeFor[Spec]())
}

// checkSchema compares a schema's properties with a struct's JSON fields,
// both ways, recursing into structs, pointers and slices.
func checkSchema(t *testing.T, path string, schema map[string]any, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Struct: "object",
		reflect.Slice: "array", reflect.Map: "object"}[typ.Kind()]
	if got := schema["type"]; got != want {
		t.Errorf("%s: schema type %v, want %s (%s)", path, got, want, typ)
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		checkSchema(t, path+"[]", schema["items"].(map[string]any), typ.Elem())
	case reflect.Struct:
		props, _ := schema["properties"].(map[string]any)
		seen := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			seen[name] = true
			sub, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: not in the CRD schema", path, name)
				continue
			}
			checkSchema(t, path+"."+name, sub, f.Type)
		}
		for name := range props {
			if !seen[name] {
				t.Errorf("%s.%s: in the CRD schema, not in %s", path, name, typ)
			}
		}
	}
}
