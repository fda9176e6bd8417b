// A compile-only stand-in for sigs.k8s.io/mcs-api/controllers v0.5.2,
// which the module mirror refuses (403; v0.5.1 is not there either).
// Cilium's pkg/clustermesh/mcsapi, imported through operator/watchers,
// needs one name from it; the MCS-API controllers never run here.
module sigs.k8s.io/mcs-api/controllers

go 1.24
