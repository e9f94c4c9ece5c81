# The builder base `deploy/image/bases.sh` makes: the debootstrapped Python base, a C toolchain
# (ring and the linker need one) and the Rust toolchain copied from the build machine into the
# context (`rust/`), laid out as the official rust image lays it out under /usr/local.
ARG BASE
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY rust /usr/local/rust
ENV PATH=/usr/local/rust/bin:/usr/local/cargo/bin:$PATH CARGO_HOME=/usr/local/cargo
RUN rustc --version && cargo --version
