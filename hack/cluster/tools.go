//go:build tools

// Package tools pins the control-plane binaries that `hack/cluster/build.sh`
// builds from source: the real kube-apiserver, kube-controller-manager, etcd,
// plus kubectl and helm for local use, at the versions fixed in go.mod / go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
