#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages rlock needs to build, test and run its demo,
# but only those that are missing. Safe to re-run; needs root (or sudo) only
# when something is actually missing.
# README.md names the packages this installs; scripts/check-readme-deps.sh
# (make docs-check) holds the two lists equal: each `need` line below is one.
set -eu

pkgs=""
need() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' || pkgs="$pkgs $1"; }

need libhiredis-dev
need libssl-dev
need uuid-dev
need redis-server
need redis-tools
# The TLS tests make their certificates with the openssl command.
need openssl
need libcriterion-dev
need pkg-config
need gcc
need make
# de_DE sources and translations for the foreign-locale test.
need locales
# The docs checks (make docs-check) and the status --json test.
need python3
for extra in "$@"; do need "$extra"; done

[ -z "$pkgs" ] && exit 0
echo "deps.sh: installing:$pkgs" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $pkgs >&2
