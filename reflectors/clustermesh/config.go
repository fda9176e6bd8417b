package clustermesh

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/internal/boundedfile"
)

// DefaultMaxConnectedClusters is Cilium's default
// --max-connected-clusters; the other size a mesh may have is
// MaxClusterID (511).
const DefaultMaxConnectedClusters = 255

// MaxLocalClusterID bounds --cluster-id with the default
// --max-connected-clusters.
const MaxLocalClusterID = DefaultMaxConnectedClusters

// Config is the clustermesh cell's configuration (hive flags).
type Config struct {
	// ClusterName and ClusterID name this cluster: the exporter writes
	// under them, and no remote may use them.
	ClusterName string
	ClusterID   uint32
	// MaxConnectedClusters is the mesh's size, 255 (zero means 255) or
	// 511, as Cilium's --max-connected-clusters: it bounds every cluster
	// ID, is declared in the cluster config, and in a mesh of 511 each
	// remote must declare 511 too.
	MaxConnectedClusters uint32
	// ClustermeshConfig is a directory with one etcd client config per
	// remote cluster, named by the cluster; empty: no remote.
	ClustermeshConfig string
	// ClustermeshSyncTimeout bounds the wait for every remote's synced
	// key; ClustermeshStaleTimeout is how long a disconnected remote's
	// backends stay.
	ClustermeshSyncTimeout  time.Duration
	ClustermeshStaleTimeout time.Duration
	// ClustermeshExport is an etcd client config file of this cluster's
	// etcd, where its global services are published; empty: none.
	// ClustermeshLeaseTTL is the life of the published keys once the
	// exporter stops renewing them.
	ClustermeshExport   string
	ClustermeshLeaseTTL time.Duration
}

// DefaultConfig imports from and exports to nothing.
var DefaultConfig = Config{
	MaxConnectedClusters:    DefaultMaxConnectedClusters,
	ClustermeshSyncTimeout:  DefaultSyncTimeout,
	ClustermeshStaleTimeout: DefaultStaleTimeout,
	ClustermeshLeaseTTL:     DefaultLeaseTTL,
}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("cluster-name", def.ClusterName, "Name of this cluster in the mesh (lowercase letters, digits and '-')")
	flags.Uint32("cluster-id", def.ClusterID, "ID of this cluster in the mesh, 1 to --max-connected-clusters")
	flags.Uint32("max-connected-clusters", def.MaxConnectedClusters, fmt.Sprintf("Size of the mesh, %d or %d, as every Cilium cluster in it is configured", DefaultMaxConnectedClusters, MaxClusterID))
	flags.String("clustermesh-config", def.ClustermeshConfig, "Directory with one etcd client config (YAML: endpoints, trusted-ca-file, cert-file, key-file) per remote cluster, named by the cluster; changes are followed")
	flags.Duration("clustermesh-sync-timeout", def.ClustermeshSyncTimeout, "How long the initial sync waits for a remote cluster's synced key before going on without it")
	flags.Duration("clustermesh-stale-timeout", def.ClustermeshStaleTimeout, "How long a disconnected remote cluster's backends stay before they are removed")
	flags.String("clustermesh-export", def.ClustermeshExport, "Etcd client config file (same format) of this cluster's etcd: publish this cluster's global services there")
	flags.Duration("clustermesh-lease-ttl", def.ClustermeshLeaseTTL, "Life of the published keys once the exporter stops renewing them (at least 1s)")
}

var clusterName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Validate checks the flags; it is called only when the mesh is used.
func (c Config) Validate() error {
	switch {
	case !clusterName.MatchString(c.ClusterName):
		return fmt.Errorf("--cluster-name %q: want 1-32 lowercase letters, digits and '-', starting and ending with a letter or digit", c.ClusterName)
	case c.MaxConnectedClusters != 0 && c.MaxConnectedClusters != DefaultMaxConnectedClusters && c.MaxConnectedClusters != MaxClusterID:
		return fmt.Errorf("--max-connected-clusters %d: want %d or %d", c.MaxConnectedClusters, DefaultMaxConnectedClusters, MaxClusterID)
	case c.ClusterID == 0 || c.ClusterID > c.self().maxConnected():
		return fmt.Errorf("--cluster-id %d: want 1-%d (--max-connected-clusters)", c.ClusterID, c.self().maxConnected())
	case c.ClustermeshSyncTimeout <= 0:
		return fmt.Errorf("--clustermesh-sync-timeout %s: want a duration above zero", c.ClustermeshSyncTimeout)
	case c.ClustermeshExport != "" && c.ClustermeshLeaseTTL < time.Second:
		return fmt.Errorf("--clustermesh-lease-ttl %s: want 1s or more", c.ClustermeshLeaseTTL)
	case c.ClustermeshStaleTimeout <= 0:
		return fmt.Errorf("--clustermesh-stale-timeout %s: want a duration above zero", c.ClustermeshStaleTimeout)
	}
	return nil
}

// enabled says whether the mesh is used at all.
func (c Config) enabled() bool { return c.ClustermeshConfig != "" || c.ClustermeshExport != "" }

func (c Config) self() Self {
	return Self{Name: c.ClusterName, ID: c.ClusterID, MaxConnectedClusters: c.MaxConnectedClusters}
}

// EtcdFile is the etcd client config file a cluster is reached with, as
// Cilium writes it (etcd's own client YAML). Relative paths are relative
// to the file's directory.
type EtcdFile struct {
	Endpoints     []string `yaml:"endpoints"`
	TrustedCAFile string   `yaml:"trusted-ca-file"`
	CertFile      string   `yaml:"cert-file"`
	KeyFile       string   `yaml:"key-file"`
}

// LoadEtcdFile reads an etcd client config file into a client config,
// its TLS with the files it names loaded. version changes whenever the
// file or one it names does. Errors name the file and the field, never
// a file's content. Every file is read bounded (readBounded): a FIFO or a
// device is refused, not waited on or read forever.
func LoadEtcdFile(path string) (cfg clientv3.Config, version [32]byte, err error) {
	data, err := readBounded(path)
	if err != nil {
		return cfg, version, err
	}
	return parseEtcdFile(path, data)
}

// readBounded reads one of the files the clustermesh source is given.
func readBounded(path string) ([]byte, error) {
	data, _, err := boundedfile.Read(path, maxFileSize, "the clustermesh file size limit")
	return data, err
}

// parseEtcdFile is LoadEtcdFile of the config file's content, data.
func parseEtcdFile(path string, data []byte) (cfg clientv3.Config, version [32]byte, err error) {
	var f EtcdFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return cfg, version, fmt.Errorf("%s: not an etcd client config: %w", path, err)
	}
	if len(f.Endpoints) == 0 {
		return cfg, version, fmt.Errorf("%s: endpoints: none", path)
	}
	h := sha256.New()
	h.Write(data)
	read := func(field, name string) ([]byte, error) {
		if name == "" {
			return nil, nil
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(path), name)
		}
		b, err := readBounded(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, field, err)
		}
		h.Write(b)
		return b, nil
	}
	ca, err := read("trusted-ca-file", f.TrustedCAFile)
	if err != nil {
		return cfg, version, err
	}
	cert, err := read("cert-file", f.CertFile)
	if err != nil {
		return cfg, version, err
	}
	key, err := read("key-file", f.KeyFile)
	if err != nil {
		return cfg, version, err
	}
	cfg.Endpoints = f.Endpoints
	if ca != nil || cert != nil || key != nil {
		if cfg.TLS, err = tlsConfig(ca, cert, key); err != nil {
			return cfg, version, fmt.Errorf("%s: %w", path, err)
		}
	}
	copy(version[:], h.Sum(nil))
	return cfg, version, nil
}

func tlsConfig(ca, cert, key []byte) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(ca) {
			return nil, errors.New("trusted-ca-file: no PEM certificate in it")
		}
	}
	if (cert == nil) != (key == nil) {
		return nil, errors.New("cert-file and key-file: give both or neither")
	}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			// X509KeyPair's errors never quote the key.
			return nil, fmt.Errorf("cert-file, key-file: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// isEtcdFile says whether a file of the config directory is a cluster's
// config rather than a file it names (a certificate, a key), the way
// Cilium tells them apart: by an endpoints key.
func isEtcdFile(data []byte) bool {
	return bytes.Contains(data, []byte("endpoints:"))
}

// maxFileSize bounds every file the clustermesh source reads: a config,
// a certificate bundle, a key (internal/boundedfile). 1 MiB holds a CA
// bundle of some 500 certificates.
const maxFileSize = 1 << 20
