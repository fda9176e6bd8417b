package clustermesh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad flags are refused at start, naming the flag.
func TestConfigValidateNamesTheFlag(t *testing.T) {
	good := Config{ClusterName: "c1", ClusterID: 1, ClustermeshConfig: "dir", ClustermeshSyncTimeout: time.Second, ClustermeshStaleTimeout: time.Second, ClustermeshLeaseTTL: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	large := good
	large.MaxConnectedClusters, large.ClusterID = 511, 511
	if err := large.Validate(); err != nil {
		t.Fatalf("cluster 511 of a mesh of 511: %v", err)
	}
	for flag, change := range map[string]func(*Config){
		"--cluster-id 0":                func(c *Config) { c.ClusterID = 0 },
		"--cluster-id 256":              func(c *Config) { c.ClusterID = 256 },
		"--cluster-name":                func(c *Config) { c.ClusterName = "" },
		`--cluster-name "C_1"`:          func(c *Config) { c.ClusterName = "C_1" },
		"--clustermesh-sync-timeout":    func(c *Config) { c.ClustermeshSyncTimeout = 0 },
		"--clustermesh-stale-timeout":   func(c *Config) { c.ClustermeshStaleTimeout = 0 },
		"--clustermesh-lease-ttl 500ms": func(c *Config) { c.ClustermeshExport, c.ClustermeshLeaseTTL = "f", 500*time.Millisecond },
		"--max-connected-clusters 300":  func(c *Config) { c.MaxConnectedClusters = 300 },
		"--cluster-id 512":              func(c *Config) { c.MaxConnectedClusters, c.ClusterID = 511, 512 },
	} {
		c := good
		change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
}

// A config file's errors name the file and the field, and never quote
// a key.
func TestLoadEtcdFileNamesFileAndField(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := write("client.key", "-----BEGIN EC PRIVATE KEY-----\nc2VjcmV0\n-----END EC PRIVATE KEY-----\n")
	write("client.crt", "not a certificate")
	for content, want := range map[string]string{
		"endpoints: [":  "not an etcd client config",
		"endpoints: []": "endpoints: none",
		"endpoints: [https://x:2379]\ntrusted-ca-file: nope":                   "trusted-ca-file",
		"endpoints: [https://x:2379]\ntrusted-ca-file: client.crt":             "trusted-ca-file: no PEM certificate",
		"endpoints: [https://x:2379]\ncert-file: client.crt":                   "give both or neither",
		"endpoints: [https://x:2379]\ncert-file: client.crt\nkey-file: " + key: "cert-file, key-file",
	} {
		path := write("c2", content)
		_, _, err := LoadEtcdFile(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v, want %q and the path", content, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%q: the error quotes the key: %v", content, err)
		}
	}
	cfg, v1, err := LoadEtcdFile(write("c2", "endpoints: [http://127.0.0.1:2379]\n"))
	if err != nil || len(cfg.Endpoints) != 1 || cfg.TLS != nil {
		t.Fatalf("plain config: %v %v", cfg.Endpoints, err)
	}
	_, v2, _ := LoadEtcdFile(write("c2", "endpoints: [http://127.0.0.1:2379]\n# changed\n"))
	if v1 == v2 {
		t.Error("a changed file has the same version")
	}
}
