package lb

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Topology keys: ServiceParams.TopologyKeys lists node label keys, tried in
// order, to prefer the backends whose node has this node's value.
const (
	// TopologyKeyAny, last in a list, falls back to every backend. Without
	// it the list is strict: traffic that cannot stay within the listed
	// topology has no backend for new flows.
	TopologyKeyAny = "*"
	// TopologyKeyHostname compares node names rather than labels, so a
	// backend on this node matches even before its node's labels are seen.
	TopologyKeyHostname = "kubernetes.io/hostname"
	// MaxTopologyKeys is the most keys a service may list (as the
	// Kubernetes Service API's topologyKeys allowed).
	MaxTopologyKeys = 16
	// TopologyLevelNone is Frontend.TopologyLevel when no listed key
	// matched and there is no "*": no backend takes new flows on this
	// node. It cannot be a label key.
	TopologyLevelNone = "(none)"
)

// ValidateTopologyKeys reports what is wrong with a list of topology keys:
// more than MaxTopologyKeys, an empty or repeated key, or "*" anywhere but
// last.
func ValidateTopologyKeys(keys []string) error {
	if len(keys) > MaxTopologyKeys {
		return fmt.Errorf("%d keys, at most %d allowed", len(keys), MaxTopologyKeys)
	}
	for i, k := range keys {
		switch {
		case strings.TrimSpace(k) == "":
			return fmt.Errorf("key %d: empty", i+1)
		case k == TopologyKeyAny && i != len(keys)-1:
			return fmt.Errorf("key %d: %q must be the last key", i+1, TopologyKeyAny)
		case slices.Contains(keys[:i], k):
			return fmt.Errorf("key %d: %q listed twice", i+1, k)
		}
	}
	return nil
}

// ParseTopologyKeys parses a comma-separated list of topology keys (the
// lbstate.io/topology-keys annotation), trimming spaces, and validates it.
func ParseTopologyKeys(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list")
	}
	keys := strings.Split(s, ",")
	for i := range keys {
		keys[i] = strings.TrimSpace(keys[i])
	}
	if err := ValidateTopologyKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// NodeLabels is a row of the node-labels table: the labels of one node of
// this cluster, which give its backends their topology values. The
// labels are a slice sorted by key rather than a map: a cluster has
// thousands of nodes with a dozen labels each, and a slice is half the
// size.
type NodeLabels struct {
	Name   string  `json:"name" yaml:"name"`
	Labels []Label `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// Label is one label of a node.
type Label struct {
	Key   string `json:"key" yaml:"key"`
	Value string `json:"value" yaml:"value"`
}

// NewNodeLabels returns the row of node name with labels (copied).
func NewNodeLabels(name string, labels map[string]string) *NodeLabels {
	n := &NodeLabels{Name: name, Labels: make([]Label, 0, len(labels))}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		n.Labels = append(n.Labels, Label{k, labels[k]})
	}
	return n
}

// Get returns the value of label key.
func (n *NodeLabels) Get(key string) (string, bool) {
	i, found := slices.BinarySearchFunc(n.Labels, key, func(l Label, k string) int { return strings.Compare(l.Key, k) })
	if !found {
		return "", false
	}
	return n.Labels[i].Value, true
}

// Is reports whether the node has exactly labels.
func (n *NodeLabels) Is(labels map[string]string) bool {
	if len(n.Labels) != len(labels) {
		return false
	}
	for _, l := range n.Labels {
		if v, ok := labels[l.Key]; !ok || v != l.Value {
			return false
		}
	}
	return true
}

func (n *NodeLabels) TableHeader() []string { return []string{"Name", "Labels"} }

func (n *NodeLabels) TableRow() []string {
	out := make([]string, len(n.Labels))
	for i, l := range n.Labels {
		out[i] = l.Key + "=" + l.Value
	}
	return []string{n.Name, strings.Join(out, ", ")}
}

// formatLabels prints labels sorted by key: "k1=v1, k2=v2".
func formatLabels(labels map[string]string) string {
	out := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return strings.Join(out, ", ")
}
