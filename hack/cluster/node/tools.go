//go:build tools

// Package tools pins the node binaries that `hack/cluster/build.sh --node` builds from source:
// kubelet and kube-scheduler, from the same k8s.io/kubernetes release as the control plane in
// ../go.mod (a module of its own, so that adding them never changes the control plane's cache key).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
