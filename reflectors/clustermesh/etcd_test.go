package clustermesh

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

// startEtcd runs a real single-member etcd on loopback ports and returns
// a client of it, its client config and the server.
func startEtcd(t *testing.T) (*clientv3.Client, clientv3.Config, *embedetcd.Server) {
	t.Helper()
	srv, err := embedetcd.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cli, err := clientv3.New(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, clientv3.Config{Endpoints: []string{srv.Endpoint()}}, srv
}
