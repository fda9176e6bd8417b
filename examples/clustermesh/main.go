// Command clustermesh runs the etcd of a two-cluster demo on this
// machine: an embedded etcd on a loopback port, and the files two
// agents need to join the mesh through it: each cluster's
// --clustermesh-config directory (a file naming the other cluster) and
// the --clustermesh-export file. It prints the two agents' commands and
// runs until interrupted.
//
//	go run ./examples/clustermesh --dir /tmp/mesh
//
// Both clusters export to, and import from, this one etcd, each under its
// own name (Cilium gives each cluster its own etcd; the keys are the
// same either way).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "lbstate-mesh"), "Directory for the etcd's data and the agents' clustermesh files")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "clustermesh:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	srv, err := embedetcd.Start(filepath.Join(dir, "etcd"), nil)
	if err != nil {
		return err
	}
	defer srv.Stop()
	export := filepath.Join(dir, "etcd.yaml")
	files := []string{export}
	clusters := []string{"cluster-a", "cluster-b"}
	for i, c := range clusters {
		other := clusters[1-i]
		files = append(files, filepath.Join(dir, c, other))
	}
	for _, f := range files {
		if err := srv.WriteClientConfig(f, nil); err != nil {
			return err
		}
	}
	fmt.Printf("etcd listening on %s; its data in %s\n\nRun the two agents (one terminal each):\n\n", srv.Endpoint(), filepath.Join(dir, "etcd"))
	for i, c := range clusters {
		fmt.Printf("  go run ./examples/agent --manifests examples/clustermesh/%s --k8s-node-name node-%c \\\n"+
			"    --cluster-name %s --cluster-id %d --clustermesh-config %s --clustermesh-export %s \\\n"+
			"    --lb-pin-dir /sys/fs/bpf/lbstate-%s --api-addr 127.0.0.1:98%d1 --metrics-addr 127.0.0.1:98%d2\n\n",
			c, 'a'+i, c, i+1, filepath.Join(dir, c), export, c, i+2, i+2)
	}
	fmt.Println("then: go run ./cmd/lbctl frontends --api http://127.0.0.1:9821")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
