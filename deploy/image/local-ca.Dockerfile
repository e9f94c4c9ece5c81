# The local bases' last layer (`deploy/image/bases.sh`): the certificate authorities added to the
# build machine's trust store (the context's *.crt), trusted by the system bundle, pip and uv.
ARG BASE
FROM ${BASE}
COPY . /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt
