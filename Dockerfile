# sluicegate's image: a builder stage compiles the wheel from the sdist, the runtime stage is a
# slim Debian Python with that wheel and the locked dependencies, run by a user of its own.
#
#   docker build -t sluicegate:0.1.0 .
#
# The defaults below are the official images. `make image` builds on a machine that reaches no
# image registry: it makes both bases from Debian's packages (deploy/image/bases.sh) and names
# them with --build-arg. The legacy builder and BuildKit both build this file.
ARG BUILDER_IMAGE=rust:1.95-slim-bookworm
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${BUILDER_IMAGE} AS builder
ARG UV_VERSION=0.13.8
# The official rust image has no Python; the wheel is built for the runtime stage's CPython 3.11
# (both images are Debian bookworm, so the wheel's glibc floor is the runtime's).
RUN if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi
ENV PATH=/opt/build/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml uv.lock ./
# maturin at the version uv.lock pins, and the runtime's requirements with their hashes (the
# postgres extra included: the image serves SQLite and PostgreSQL alike).
RUN python3 -m venv /opt/build \
    && pip install --no-cache-dir --quiet "uv==${UV_VERSION}" \
    && mkdir /dist \
    && uv export --quiet --frozen --only-group build --no-emit-project -o /tmp/build.txt \
    && pip install --no-cache-dir --quiet --require-hashes -r /tmp/build.txt \
    && uv export --quiet --frozen --no-dev --extra postgres --no-emit-project \
        -o /dist/requirements.txt
COPY Cargo.toml Cargo.lock README.md ./
COPY proxy_core proxy_core
COPY bench/tools bench/tools
COPY vendor vendor
COPY python python
COPY control control
# The sdist, then the wheel compiled from it: every image build proves the sdist builds.
RUN maturin build --release --sdist --out /dist

FROM ${PYTHON_IMAGE} AS runtime
# A system user of its own (fixed ids, so Kubernetes' runAsNonRoot can check them); its home
# holds the SQLite file, its encryption key file and the usage journal: the volume.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/sluicegate \
        --shell /usr/sbin/nologin sluicegate \
    && install -d -o sluicegate -g sluicegate -m 0700 /var/lib/sluicegate
COPY --from=builder /dist/requirements.txt /dist/*.whl /tmp/sluicegate/
RUN python3 -m venv /opt/sluicegate \
    && /opt/sluicegate/bin/pip install --no-cache-dir --quiet --disable-pip-version-check \
        --require-hashes -r /tmp/sluicegate/requirements.txt \
    && /opt/sluicegate/bin/pip install --no-cache-dir --quiet --disable-pip-version-check \
        --no-deps /tmp/sluicegate/*.whl \
    && /opt/sluicegate/bin/pip uninstall --quiet --yes pip \
    && rm -rf /tmp/sluicegate
# Inside a container the loopback is the container's own, so the admin API listens on every
# address: publish its port to a private network only (it holds the operators' API and /metrics).
# The HEALTHCHECK reads the data address from SLUICEGATE_DATA_LISTEN, and whether it speaks TLS
# from SLUICEGATE_TLS_CERT_FILE: set them there, not in a config file.
ENV PATH=/opt/sluicegate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICEGATE_DATA_LISTEN=0.0.0.0:8080 \
    SLUICEGATE_ADMIN_LISTEN=0.0.0.0:8081 \
    SLUICEGATE_DATABASE_URL=sqlite:////var/lib/sluicegate/sluicegate.db
WORKDIR /var/lib/sluicegate
VOLUME ["/var/lib/sluicegate"]
EXPOSE 8080 8081
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python3", "-m", "sluicegate.healthcheck"]
# `serve` is PID 1 and handles SIGTERM itself (unready, drain, usage written, exit 0); it starts
# no child processes, so no init is needed to reap them. Give `docker stop` the time to drain:
# `--time` above server.unready_seconds + 2 x server.shutdown_grace_seconds (65 s by default).
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluicegate"]
CMD ["serve"]
