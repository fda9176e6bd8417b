package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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

// lbctl redirects lists every policy with what it redirects on this
// node, its pods, and why it does not when it does not: a newer policy on
// the same Service waits for the older, a policy without pods redirects
// nothing (its address goes where it would without it) and says so.
func TestRedirectsShowsWhatEachPolicyRedirectsOrWhyNot(t *testing.T) {
	api := serveAgent(t, redirectsPipeline(t))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"redirects", "--api", api}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := []string{
		"Name                      Source  Frontend                                      Redirects             Pods            Why",
		"kube-system/linklocal     file    address 169.254.20.10 53/UDP                  169.254.20.10:53/UDP  node-local-dns",
		"kube-system/metadata      file    address 169.254.169.254 80/TCP                                                      no pod on this node in namespace kube-system matches the selector",
		"kube-system/newer-dns     file    service kube-system/kube-dns (all UDP ports)                        node-local-dns  service kube-system/kube-dns is redirected by the older policy kube-system/nodelocaldns",
		"kube-system/nodelocaldns  file    service kube-system/kube-dns (all UDP ports)  10.96.0.10:53/UDP     node-local-dns",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		got = append(got, strings.TrimRight(l, " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, format := range []string{"json", "yaml"} {
		stdout.Reset()
		if code := run([]string{"redirects", "--api", api, "-o", format}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var reports []struct {
			Name      string
			Target    string
			Pods      []struct{ Name, State string }
			Redirects []string
			LostTo    string `json:"lostTo" yaml:"lostTo"`
		}
		var err error
		if format == "json" {
			err = json.Unmarshal(stdout.Bytes(), &reports)
		} else {
			err = yaml.Unmarshal(stdout.Bytes(), &reports)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", format, err, stdout.String())
		}
		if len(reports) != 4 || reports[3].Name != "kube-system/nodelocaldns" || reports[3].Target != "kube-system/nodelocaldns:lrp" ||
			!slices.Equal(reports[3].Redirects, []string{"10.96.0.10:53/UDP"}) || len(reports[3].Pods) != 1 || reports[3].Pods[0].State != "active" ||
			reports[2].LostTo != "kube-system/nodelocaldns" {
			t.Errorf("%s: %+v", format, reports)
		}
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
