#!/usr/bin/env bash
# `make image`: the image from the Dockerfile, on bases made from Debian's packages (bases.sh)
# unless BUILDER_IMAGE and PYTHON_IMAGE name others (e.g. the Dockerfile's official defaults).
# Prints the image's name and size. Run it under with-docker.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE=${IMAGE:-sluicegate:$version}
if [ -z "${BUILDER_IMAGE:-}" ] || [ -z "${PYTHON_IMAGE:-}" ]; then
    export PYTHON_BASE=${PYTHON_BASE:-sluicegate-local/python:3.11-bookworm}
    export BUILDER_BASE=${BUILDER_BASE:-sluicegate-local/rust:bookworm}
    deploy/image/bases.sh
    BUILDER_IMAGE=${BUILDER_IMAGE:-$BUILDER_BASE}
    PYTHON_IMAGE=${PYTHON_IMAGE:-$PYTHON_BASE}
fi
docker build --network host --quiet \
    --build-arg "BUILDER_IMAGE=$BUILDER_IMAGE" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" \
    -t "$IMAGE" . >/dev/null
size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
echo "image $IMAGE: $((size / 1000000)) MB (on $PYTHON_IMAGE)"
