#!/usr/bin/env bash
# The two base images the Dockerfile names, made here from Debian's packages, for a machine that
# reaches no image registry (`make image` runs this; with a registry, the Dockerfile's defaults,
# the official python and rust images, are used instead and this script is not needed):
#   $PYTHON_BASE   Debian bookworm (minbase) with its Python 3.11, venv and CA certificates: what
#                  the official python:3.11-slim-bookworm gives the runtime stage;
#   $BUILDER_BASE  that, plus gcc and the Rust toolchain this machine builds with (rustup's, copied
#                  in: Debian's rustc is older than the workspace's rust-version): what the
#                  official rust image gives the builder stage.
# Both also trust the certificate authorities added to this machine's trust store (those in
# /usr/local/share/ca-certificates), as the machine's own pip and cargo do: without them a build
# behind a TLS-inspecting proxy reaches no package registry. Images built on them trust the same.
# Each image is made once and kept; the CA layer is made again when those certificates change,
# the toolchain when rustc does. Needs root, debootstrap and a running Docker daemon.
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON_BASE=${PYTHON_BASE:-sluicegate-local/python:3.11-bookworm}
BUILDER_BASE=${BUILDER_BASE:-sluicegate-local/rust:bookworm}
RAW_PYTHON=sluicegate-local/debootstrap:bookworm
RAW_BUILDER=sluicegate-local/debootstrap-rust:bookworm
SUITE=bookworm
CA_DIR=/usr/local/share/ca-certificates

# The Debian mirror this machine's apt uses (deb822 sources first, then the one-line format).
mirror() {
    local uri
    uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    if [ -z "$uri" ]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' \
            /etc/apt/sources.list 2>/dev/null || true)
    fi
    [ -n "$uri" ] || { echo "bases.sh: no Debian mirror found in apt's sources" >&2; exit 1; }
    echo "$uri"
}

label() { docker image inspect --format "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }
present() { docker image inspect "$1" >/dev/null 2>&1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! present "$RAW_PYTHON"; then
    echo "bases.sh: debootstrap $SUITE"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,passwd \
        "$SUITE" "$work/rootfs" "$(mirror)" >"$work/debootstrap.log" 2>&1 ||
        { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
        "$work/rootfs/usr/share/doc/"* "$work/rootfs/usr/share/man/"*
    tar -C "$work/rootfs" -c . | docker import \
        -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' - "$RAW_PYTHON" >/dev/null
    rm -rf "$work/rootfs"
fi

rustc_version=$(rustc --version)
if [ "$(label "$RAW_BUILDER" sluicegate.rustc)" != "$rustc_version" ]; then
    echo "bases.sh: builder base with $rustc_version"
    sysroot=$(rustc --print sysroot)
    mkdir -p "$work/rust/rust/bin"
    cp -a "$sysroot/bin/cargo" "$sysroot/bin/rustc" "$sysroot/bin/rustdoc" "$work/rust/rust/bin/"
    cp -a "$sysroot/lib" "$work/rust/rust/lib"
    docker build --network host --quiet --build-arg "BASE=$RAW_PYTHON" \
        --label "sluicegate.rustc=$rustc_version" \
        -f deploy/image/builder-base.Dockerfile -t "$RAW_BUILDER" "$work/rust" >/dev/null
    rm -rf "$work/rust"
fi

# The locally added CAs (none: the raw images as they are), and a digest that names them.
mkdir -p "$work/ca"
find "$CA_DIR" -maxdepth 2 -name '*.crt' -type f -exec cp {} "$work/ca/" \; 2>/dev/null || true
ca_digest=$(cat "$work/ca/"*.crt 2>/dev/null | sha256sum | cut -c1-16)
for pair in "$RAW_PYTHON=$PYTHON_BASE" "$RAW_BUILDER=$BUILDER_BASE"; do
    raw=${pair%%=*} base=${pair#*=}
    from=$(docker image inspect --format '{{.Id}}' "$raw")
    if [ "$(label "$base" sluicegate.ca)" = "$ca_digest" ] &&
        [ "$(label "$base" sluicegate.from)" = "$from" ]; then
        continue
    fi
    docker build --network host --quiet --build-arg "BASE=$raw" \
        --label "sluicegate.ca=$ca_digest" --label "sluicegate.from=$from" \
        -f deploy/image/local-ca.Dockerfile -t "$base" "$work/ca" >/dev/null
done
