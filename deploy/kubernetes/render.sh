#!/usr/bin/env bash
# `make manifests`: each overlay rendered by kustomize into rendered/OVERLAY.yaml, the plain
# manifests `kubectl apply -f` takes (tests/deploy/ validates them and checks them against
# `serve`). Needs kubectl 1.21 or later (its built-in kustomize).
set -euo pipefail
cd "$(dirname "$0")"
for dir in overlays/*/; do
    name=$(basename "$dir")
    {
        echo "# Rendered by \`make manifests\` (kubectl kustomize deploy/kubernetes/overlays/$name): edit"
        echo "# the base or the overlay, not this file."
        kubectl kustomize "$dir"
    } >"rendered/$name.yaml.tmp"
    mv "rendered/$name.yaml.tmp" "rendered/$name.yaml"
done
