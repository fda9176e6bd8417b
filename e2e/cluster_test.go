package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// cluster is a test's own Kubernetes control plane: a real API server
// (no controller-manager: the test writes EndpointSlices and load
// balancer status itself, as those controllers would) and its clients.
type cluster struct {
	t    testing.TB
	api  *apiServer
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string // the test's namespace
}

// clusterOptions change what newCluster sets up.
type clusterOptions struct {
	// noCRDs leaves the CRDs out (to install them later with applyCRDs).
	noCRDs bool
}

// newCluster starts an API server for the test, installs the CRDs that
// lbstate reads (Gateway API, SMI TrafficSplit, CiliumLocalRedirectPolicy)
// and creates the test's namespace.
func newCluster(t testing.TB, opts clusterOptions) *cluster {
	t.Helper()
	c := &cluster{t: t, api: startAPIServer(t), ns: "e2e"}
	c.connect()
	if !opts.noCRDs {
		c.applyCRDs()
	}
	_, err := c.kube.CoreV1().Namespaces().Create(c.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) connect() {
	var err error
	if c.kube, err = kubernetes.NewForConfig(c.api.cfg); err != nil {
		c.t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(c.api.cfg); err != nil {
		c.t.Fatal(err)
	}
}

// ctx is a context for one API call.
func (c *cluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.t.Cleanup(cancel)
	return ctx
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdFiles are the CRD manifests the suite installs.
func crdFiles(t testing.TB) []string {
	t.Helper()
	gatewayDir, err := moduleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := filepath.Glob(filepath.Join(gatewayDir, "config/crd/standard/*.yaml"))
	if err != nil || len(gateway) == 0 {
		t.Fatalf("the Gateway API's CRDs in %s: %v", gatewayDir, err)
	}
	return append(gateway,
		"testdata/crds/trafficsplits.yaml",
		"../reflectors/redirectpolicy/crd/ciliumlocalredirectpolicies.yaml")
}

var moduleDirs sync.Map

// moduleDir is where the Go module cache holds a module the suite
// requires (go.mod pins its version).
func moduleDir(path string) (string, error) {
	if d, ok := moduleDirs.Load(path); ok {
		return d.(string), nil
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", path, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: not in the module cache (run go mod download in e2e/)", path)
	}
	moduleDirs.Store(path, dir)
	return dir, nil
}

// applyCRDs installs every CRD of crdFiles and waits until each is
// Established.
func (c *cluster) applyCRDs() {
	c.t.Helper()
	var names []string
	for _, f := range crdFiles(c.t) {
		objs, err := readManifests(f)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() != "CustomResourceDefinition" {
				continue // e.g. the Gateway API's admission policy
			}
			if _, err := c.dyn.Resource(crdResource).Create(c.ctx(), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				c.t.Fatalf("%s: %v", f, err)
			}
			names = append(names, u.GetName())
		}
	}
	for _, name := range names {
		c.waitEstablished(name)
	}
}

// waitEstablished waits until the CRD named name is Established.
func (c *cluster) waitEstablished(name string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, func() error {
		u, err := c.dyn.Resource(crdResource).Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not Established", name)
	})
}

// readManifests decodes every object of a YAML file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// eventually polls cond until it returns nil, failing the test with its
// last error after timeout.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("after %s: %v", timeout, err)
	}
}

// poll polls cond every 20 ms until it returns nil (then nil) or timeout
// passes (then its last error).
func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
