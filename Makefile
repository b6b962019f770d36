# poolboy developer entry points. `make test` is THE test command (CI runs it
# through .ci/run).
.PHONY: help cluster cluster-down cluster-status cluster-build test

help:
	@echo "make cluster         start the local control plane (kubeconfig: target/cluster/kubeconfig)"
	@echo "make cluster-down    stop it and remove its state"
	@echo "make cluster-status  is it up?"
	@echo "make cluster-build   build etcd, kube-apiserver, kube-controller-manager and helm (cached)"
	@echo "make test            fmt check, clippy, all tests against a fresh control plane"

cluster:
	@hack/cluster/cluster.sh up

cluster-down:
	@hack/cluster/cluster.sh down

cluster-status:
	@hack/cluster/cluster.sh status

cluster-build:
	@hack/cluster/build.sh

test:
	@hack/test.sh
