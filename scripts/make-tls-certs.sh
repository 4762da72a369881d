#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Throwaway TLS certificates for a local redis-server (make bench):
#   scripts/make-tls-certs.sh DIR  -> DIR/ca.crt, DIR/server.crt, DIR/server.key
# A CA of its own and a server certificate for localhost and 127.0.0.1
# signed by it (EC P-256, one day). The keys are not protected: DIR is the
# caller's temporary directory and goes away with it.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
{
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout ca.key -out ca.crt -days 1 -subj "/CN=rlock bench CA"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout server.key -out server.csr -subj "/CN=localhost"
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out server.crt -days 1 -extfile server.ext
} >openssl.log 2>&1 || { cat openssl.log >&2; exit 1; }
chmod 600 ca.key server.key
