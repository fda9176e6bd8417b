package clustermesh

import "strings"

// The stores a Cilium agent (and operator) watches in a remote cluster's
// etcd, each waited for through its synced key when the cluster's config
// declares syncedCanaries. lbstate has nodes, IPs, identities and MCS-API
// ServiceExports to offer none of, so its exporter marks those stores
// synced and empty, as Cilium's clustermesh-apiserver does for a
// cluster without them; otherwise every Cilium agent would wait for
// them until its clustermesh-sync-timeout and then treat this cluster as
// not ready.
const (
	nodesStorePrefix          = "cilium/state/nodes/v1"
	ipsStorePrefix            = "cilium/state/ip/v1"
	identitiesStorePrefix     = "cilium/state/identities/v1"
	serviceExportsStorePrefix = "cilium/state/serviceexports/v1"
)

// SyncedKeys are the keys the exporter writes once its initial export is
// in etcd: the services store's (SyncedKey), and those of the stores it
// publishes empty (nodes, IPs, identities, ServiceExports).
func SyncedKeys(cluster string) []string {
	stores := []string{nodesStorePrefix, ipsStorePrefix, identitiesStorePrefix,
		strings.TrimSuffix(ServicesPrefix, "/"), serviceExportsStorePrefix}
	keys := make([]string, len(stores))
	for i, s := range stores {
		keys[i] = syncedPrefix + cluster + "/" + s
	}
	return keys
}
