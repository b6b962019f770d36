# poolboy developer entry points. `make test` is THE test command (CI runs it
# through .ci/run).
.PHONY: help cluster cluster-down cluster-status cluster-build image deploy undeploy test run bench bench-scale soak chaos upstream-acceptance

help:
	@echo "make cluster         start the local control plane (kubeconfig: target/cluster/kubeconfig)"
	@echo "make cluster-down    stop it and remove its state"
	@echo "make cluster-status  is it up?"
	@echo "make cluster-build   build etcd, kube-apiserver, kube-controller-manager, helm, and the node (cached)"
	@echo "make image           build the image offline (buildah) and load it into the local node"
	@echo "make deploy          the cluster, the image, and the chart: the broker in a Pod, with the examples"
	@echo "make undeploy        helm uninstall (CRDs and objects stay)"
	@echo "make test            fmt check, clippy, helm lint, all tests against a fresh control plane"
	@echo "make run             the control plane, the CRDs and examples, and the broker in the foreground"
	@echo "make bench           bursts of 1,000 warm and cold claims, 50/s sustained, the highest rate held, a quiet minute, 2 replicas (release build)"
	@echo "make bench-scale     the broker at 10,000 and 100,000 bound claims: start, memory, a warm bind, idle"
	@echo "make soak            claims coming and going for SOAK_MINUTES (12) at SOAK_RATE/s (6), SOAK_LIVE (100) live: RSS, CPU, binds; an SVG"
	@echo "make chaos           3 long chaos runs: 2 broker processes killed at random, an API-server restart"
	@echo "make upstream-acceptance  upstream Poolboy's own Ansible scenarios against the broker (POOLBOY_UPSTREAM: its checkout)"

cluster:
	@hack/cluster/cluster.sh up

cluster-down:
	@hack/cluster/cluster.sh down

cluster-status:
	@hack/cluster/cluster.sh status

cluster-build:
	@hack/cluster/build.sh
	@hack/cluster/build.sh --node

image:
	@hack/image/build.sh

deploy:
	@hack/deploy.sh

undeploy:
	@hack/deploy.sh uninstall

test:
	@hack/test.sh

run:
	@hack/run.sh

bench:
	@hack/bench.sh

bench-scale:
	@hack/bench.sh scale

soak:
	@hack/bench.sh soak

chaos:
	@hack/chaos.sh

upstream-acceptance:
	@hack/upstream-acceptance.sh
