package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func redirectsPipeline(t *testing.T) *pipeline {
	t.Helper()
	p, err := startPipeline("testdata/redirects", "node-a", "", "random", 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// lbctl redirects lists the frontends policies redirect, and only those:
// kube-dns's ClusterIP sent to the policy's pod, and the policy's own
// link-local address.
func TestRedirectsListsRedirectedFrontendsOnly(t *testing.T) {
	api := serveAgent(t, redirectsPipeline(t))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"redirects", "--api", api}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := []string{
		"Address               Type           Service                    RedirectedTo                  Backends",
		"10.96.0.10:53/UDP     ClusterIP      kube-system/kube-dns       kube-system/nodelocaldns:lrp  10.0.1.1:53/UDP",
		"169.254.20.10:53/UDP  LocalRedirect  kube-system/linklocal:lrp  kube-system/linklocal:lrp     10.0.1.1:53/UDP",
	}
	if got := strings.TrimSpace(stdout.String()); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}

	stdout.Reset()
	if code := run([]string{"redirects", "--api", api, "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var fes []*lb.Frontend
	if err := json.Unmarshal(stdout.Bytes(), &fes); err != nil {
		t.Fatal(err)
	}
	if len(fes) != 2 || fes[0].RedirectedTo != lb.NewServiceName("kube-system", "nodelocaldns:lrp") {
		t.Errorf("json: %d frontends, first redirected to %v", len(fes), fes[0].RedirectedTo)
	}
}

// simulate shows where a redirected frontend goes.
func TestSimulateShowsRedirects(t *testing.T) {
	var views []frontendView
	if err := json.Unmarshal([]byte(lbctl(t, "simulate", "-f", "testdata/redirects", "--k8s-node-name", "node-a", "-o", "json")), &views); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range views {
		got[v.Frontend] = v.RedirectedTo
	}
	if got["10.96.0.10:53/UDP"] != "kube-system/nodelocaldns:lrp" || got["169.254.20.10:53/UDP"] != "" {
		t.Errorf("redirects %v", got)
	}
	if table := lbctl(t, "simulate", "-f", "testdata/redirects", "--k8s-node-name", "node-a"); !strings.Contains(table, "REDIRECTED-TO") {
		t.Errorf("no REDIRECTED-TO column:\n%s", table)
	}
}
