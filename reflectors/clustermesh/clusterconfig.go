package clustermesh

import (
	"encoding/json"
	"fmt"
)

const clusterConfigPrefix = "cilium/cluster-config/"

// ClusterConfigKey is the key under which a cluster declares its ID
// (Cilium's CiliumClusterConfig). An importer reads it at each connect.
func ClusterConfigKey(cluster string) string { return clusterConfigPrefix + cluster }

// ClusterConfig is a cluster's declaration of itself, in Cilium's
// spellings.
type ClusterConfig struct {
	ID           uint32              `json:"id"`
	Capabilities ClusterCapabilities `json:"capabilities"`
}

// ClusterCapabilities say what the cluster's exporter does.
type ClusterCapabilities struct {
	// SyncedCanaries: the exporter writes the synced keys.
	SyncedCanaries       bool   `json:"syncedCanaries"`
	MaxConnectedClusters uint32 `json:"maxConnectedClusters"`
	// ServiceExportsEnabled is about MCS-API ServiceExports: the
	// exporter says false (not nil, which would mean "not supported"),
	// and marks the empty store synced, as Cilium does with MCS-API off.
	ServiceExportsEnabled *bool `json:"serviceExportsEnabled,omitempty"`
	// EndpointSlicesExportMode is empty ("services only"): lbstate
	// exports no EndpointSlices store, so Cilium agents read its
	// services store.
	EndpointSlicesExportMode string `json:"endpointSlicesExportMode,omitempty"`
}

// DecodeClusterConfig decodes and validates the value at key.
func DecodeClusterConfig(key string, value []byte) (*ClusterConfig, error) {
	var cc ClusterConfig
	if err := json.Unmarshal(value, &cc); err != nil {
		return nil, fmt.Errorf("key %s: %w", key, err)
	}
	if cc.ID == 0 || cc.ID > MaxClusterID {
		return nil, fmt.Errorf("key %s: id: %d out of range 1-%d", key, cc.ID, MaxClusterID)
	}
	return &cc, nil
}
