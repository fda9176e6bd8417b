// Package controllers stands in for sigs.k8s.io/mcs-api/controllers
// (see go.mod): only the name Cilium's code refers to, never run here.
package controllers

// DerivedServiceAnnotation is the MCS-API's annotation naming the
// Service derived from a ServiceImport (a public annotation key).
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
