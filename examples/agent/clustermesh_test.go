package main

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lbapi "github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

// The two-cluster demo (examples/clustermesh): two agents, each with its
// own manifests, export shop/web to one etcd and import each other's;
// both put all four pods of shop/web in their maps, and only their own
// behind shop/admin, which is not global.
func TestTwoClusterDemoSharesWeb(t *testing.T) {
	srv, err := embedetcd.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dir := t.TempDir()
	export := filepath.Join(dir, "etcd.yaml")
	clusters := []string{"cluster-a", "cluster-b"}
	var apis []string
	for i, c := range clusters {
		for _, f := range []string{export, filepath.Join(dir, c, clusters[1-i])} {
			if err := srv.WriteClientConfig(f, nil); err != nil {
				t.Fatal(err)
			}
		}
		api, _ := startAgentOn(t, "../clustermesh/"+c, slog.New(slog.DiscardHandler),
			"--cluster-name", c, "--cluster-id", string(rune('1'+i)),
			"--clustermesh-config", filepath.Join(dir, c), "--clustermesh-export", export)
		apis = append(apis, api)
	}
	for i, api := range apis {
		own, other := []string{"10.1.0.", "10.2.0."}[i], []string{"10.1.0.", "10.2.0."}[1-i]
		want := []string{
			own + "1:8080/TCP active\n", own + "2:8080/TCP active\n",
			other + "1:8080/TCP active cluster=" + string(rune('2'-i)), other + "2:8080/TCP active cluster=" + string(rune('2'-i)),
			own + "9:9000/TCP active\n",
			"service 10.96.0.10:80/TCP master revnat=2 type=ClusterIP algorithm=random count=4",
			"service 10.96.0.20:9000/TCP master revnat=1 type=ClusterIP algorithm=random count=1",
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			dump := mapsText(t, api)
			missing := ""
			for _, w := range want {
				if !strings.Contains(dump, w) {
					missing = w
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's maps lack %q:\n%s", clusters[i], missing, dump)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// mapsText is the agent's maps' dump as text (lbctl maps).
func mapsText(t *testing.T, api string) string {
	t.Helper()
	body, _ := get(t, "http://"+api+lbapi.MapsPath)
	var d bpf.Dump
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
