#!/bin/bash
# Compiles the Kubernetes runtime's test control plane from the Go module proxy (no download site):
# kube-apiserver, kube-controller-manager, kube-scheduler (k8s v1.36.1), etcd v3.6.8, kwok v0.8.0, and
# kwok's stages file. Run by embedded/kubernetes.ts (scripts/kubernetes.ts) only where no prebuilt
# tarball is present: OUT=<folder> bash scripts/kubernetes-build.sh. Needs Go >= 1.26 (GOTOOLCHAIN
# may fetch it); about 30 min on 2 cores, 1.2 GB of modules and 3.5 GB of build cache.
set -euo pipefail
OUT=${OUT:-$PWD/k8s-bin}; WORK=${WORK:-$(mktemp -d)}
KV=1.36.1; SV=0.36.1; EV=3.6.8; KWOKV=0.8.0
export GOFLAGS=-mod=mod
mkdir -p "$OUT" "$WORK/k8s" "$WORK/etcd"
LD="-s -w -X k8s.io/component-base/version.gitVersion=v$KV -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"
# 1) k8s.io/kubernetes has replace directives (./staging/...), so `go install ...@v` is refused; a wrapper module pins them instead.
cd "$WORK/k8s"
MOD=$(go mod download -json k8s.io/kubernetes@v$KV | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
{ printf 'module kbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' $KV
  sed -n '/^replace (/,/^)/p' "$MOD" | awk -v v=$SV '/=>/{print "\t"$1" => "$1" v"v}'
  printf ')\n'; } > go.mod
go get k8s.io/kubernetes/cmd/kube-apiserver@v$KV k8s.io/kubernetes/cmd/kube-controller-manager@v$KV k8s.io/kubernetes/cmd/kube-scheduler@v$KV
go build -ldflags "$LD" -o "$OUT/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
# 2) etcd server module also has replace directives (../api etc.): same trick. (Debian's etcd-server 3.4.23 is too old: no RequestWatchProgress.)
cd "$WORK/etcd"
cat > go.mod <<EOM
module etcdbuild

go 1.24.0

require go.etcd.io/etcd/server/v3 v$EV

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v$EV
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v$EV
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v$EV
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v$EV
)
EOM
go get go.etcd.io/etcd/server/v3@v$EV
go build -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
# 3) kwok has no replace directives: plain go install works.
GOFLAGS= GOBIN="$OUT" go install -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok@v$KWOKV
S=$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOKV/kustomize/stage
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do echo '---'; cat "$S/$f"; done > "$OUT/kwok-stages.yaml"
ls -la "$OUT"
