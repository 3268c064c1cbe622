#!/usr/bin/env bash
# Packs PostgreSQL 15 and wrk from Debian's packages into one relocatable tarball, for a load
# machine where nothing can be installed or fetched (the GPU machine's 16 cores):
#   scripts/bench/pg-portable.sh OUT.tar.xz
# Layout: usr/lib/postgresql/15/bin (initdb, postgres, pg_ctl, psql, ...), usr/bin/wrk, and libs/
# holding every shared library they link except glibc's own; run them with
# LD_LIBRARY_PATH=<unpacked>/libs. write_path.sh unpacks it and starts PostgreSQL as a plain user
# (initdb refuses root).
set -euo pipefail
out=$(readlink -f "${1:?usage: pg-portable.sh OUT.tar.xz}")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/tree/libs"
apt_o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64'
for p in postgresql-15 postgresql-client-15 libpq5 wrk libluajit2-5.1-2 libluajit-5.1-common libicu72 libxml2 \
         libxslt1.1 liblz4-1 libreadline8 libldap-2.5-0 libsasl2-2 libsasl2-modules-db libgssapi-krb5-2 libkrb5-3 \
         libk5crypto3 libkrb5support0 libkeyutils1; do
  (cd "$tmp/debs" && apt-get $apt_o download "$p" > /dev/null 2>&1) || echo "pg-portable: no package $p" >&2
done
for d in "$tmp"/debs/*.deb; do dpkg -x "$d" "$tmp/tree"; done
libdir=$tmp/tree/usr/lib/x86_64-linux-gnu
for exe in "$tmp"/tree/usr/lib/postgresql/15/bin/* "$tmp/tree/usr/bin/wrk"; do
  [ -f "$exe" ] && [ -x "$exe" ] && LD_LIBRARY_PATH=$libdir ldd "$exe" 2> /dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$tmp/tree/libs/"
rm -rf "$libdir" "$tmp"/tree/usr/share/{doc,man,locale}
tar -C "$tmp/tree" -cJf "$out" .
du -h "$out"
