// Package clustermesh shares global services between clusters over
// etcd, in Cilium's published ClusterService schema: the Importer (the
// kvstore source) merges other clusters' backends into the local
// services of the same namespace and name, the Exporter publishes this
// cluster's, and Cell runs both from flags and a config directory.
//
// It is a full peer of Cilium clusters (proven with Cilium's own code in
// e2e/cilium): the exporter marks synced every store a Cilium agent waits
// for (SyncedKeys), the cluster config declares --max-connected-clusters,
// and the annotations are read as Cilium reads them
// (lb.ServiceParams.IsGlobal, IsShared).
//
// Its traps: a remote service never creates a local one (its backends
// are written, but only a local service that declares itself global
// selects them), and every remote cluster writes as the one source
// lb.SourceKVStore, so that disconnecting a cluster removes exactly the
// backends that carry its cluster ID. The kvstore source is connected
// (lbstate_source_connected) only while every remote cluster's watch is
// established: one etcd out of reach is an outage of the source.
package clustermesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/lbstate/lbstate/lb"
)

// Key layout of Cilium's shared service store. These are a stable API
// between clusters: the exporter of every remote cluster writes them.
const (
	// ServicesPrefix is followed by "<cluster>/<namespace>/<name>".
	ServicesPrefix = "cilium/state/services/v1/"
	syncedPrefix   = "cilium/synced/"
)

// MaxClusterID is the largest cluster ID a mesh may use (Cilium's
// max-connected-clusters=511); 0 is the local, unnamed cluster and never
// a remote one.
const MaxClusterID = 511

// ServiceKey is the etcd key of a cluster's service.
func ServiceKey(cluster, namespace, name string) string {
	return ServicesPrefix + cluster + "/" + namespace + "/" + name
}

// SyncedKey is the key a cluster's exporter writes once it has written
// all its services: an importer that has seen it has the full list.
func SyncedKey(cluster string) string {
	return syncedPrefix + cluster + "/" + strings.TrimSuffix(ServicesPrefix, "/")
}

// ParseServiceKey splits a key under ServicesPrefix.
func ParseServiceKey(key string) (cluster, namespace, name string, err error) {
	rest, ok := strings.CutPrefix(key, ServicesPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("key %q: want %s<cluster>/<namespace>/<name>", key, ServicesPrefix)
	}
	return parts[0], parts[1], parts[2], nil
}

// ClusterService is one cluster's service as its exporter writes it to
// etcd (Cilium's pkg/clustermesh/store ClusterService): the field
// spellings are the wire format and must not change.
type ClusterService struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Frontends and Backends are indexed by IP address.
	Frontends map[string]PortConfiguration `json:"frontends"`
	Backends  map[string]PortConfiguration `json:"backends"`

	// Hostnames and Zones are indexed by backend IP address.
	Hostnames map[string]string      `json:"hostnames,omitempty"`
	Zones     map[string]BackendZone `json:"zones,omitempty"`

	Labels   map[string]string `json:"labels"`
	Selector map[string]string `json:"selector"`

	// IncludeExternal: the exporting service takes other clusters'
	// backends too. Shared: its own backends are offered to the others;
	// a service that is not shared contributes nothing.
	IncludeExternal bool `json:"includeExternal"`
	Shared          bool `json:"shared"`

	ClusterID uint32 `json:"clusterID"`
}

// PortConfiguration maps a port name to its port and protocol.
type PortConfiguration map[string]*L4Addr

// L4Addr is a port and protocol. Cilium writes these two fields without
// JSON tags, hence the capitals.
type L4Addr struct {
	Protocol string `json:"Protocol"`
	Port     uint16 `json:"Port"`
}

// BackendZone is where a backend runs and which zones should use it.
type BackendZone struct {
	Zone     string    `json:"zone"`
	ForZones []ForZone `json:"forZones"`
}

// ForZone names a zone that should use a backend.
type ForZone struct {
	Name string `json:"name"`
}

// String is cluster/namespace/name, as in the key.
func (s *ClusterService) String() string {
	return s.Cluster + "/" + s.Namespace + "/" + s.Name
}

// DecodeService decodes and validates the value stored at key: the key's
// cluster, namespace and name must be the value's, so that one cluster
// cannot write over another's services.
func DecodeService(key string, value []byte) (*ClusterService, error) {
	cluster, namespace, name, err := ParseServiceKey(key)
	if err != nil {
		return nil, err
	}
	var s ClusterService
	if err := json.Unmarshal(value, &s); err != nil {
		return nil, fmt.Errorf("key %s: %w", key, err)
	}
	if s.Cluster != cluster || s.Namespace != namespace || s.Name != name {
		return nil, fmt.Errorf("key %s: value names %s", key, s.String())
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("key %s: %w", key, err)
	}
	return &s, nil
}

// Validate reports what is wrong with the service, naming the field.
func (s *ClusterService) Validate() error {
	switch {
	case s.Cluster == "":
		return errors.New("cluster: empty")
	case s.Namespace == "":
		return errors.New("namespace: empty")
	case s.Name == "":
		return errors.New("name: empty")
	case s.ClusterID == 0 || s.ClusterID > MaxClusterID:
		return fmt.Errorf("clusterID: %d out of range 1-%d", s.ClusterID, MaxClusterID)
	}
	if err := validateAddresses("frontends", s.Frontends); err != nil {
		return err
	}
	return validateAddresses("backends", s.Backends)
}

func validateAddresses(field string, m map[string]PortConfiguration) error {
	for addr, ports := range m {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return fmt.Errorf("%s[%s]: %w", field, addr, err)
		}
		if a.Zone() != "" {
			return fmt.Errorf("%s[%s]: IPv6 zones are not supported", field, addr)
		}
		for port, l4 := range ports {
			switch {
			case l4 == nil:
				return fmt.Errorf("%s[%s][%s]: null", field, addr, port)
			case l4.Port == 0:
				return fmt.Errorf("%s[%s][%s]: Port: 0", field, addr, port)
			}
			if _, err := lb.ParseProtocol(l4.Protocol); err != nil {
				return fmt.Errorf("%s[%s][%s]: Protocol: %w", field, addr, port, err)
			}
		}
	}
	return nil
}
