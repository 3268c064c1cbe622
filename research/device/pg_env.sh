# Sourced by the device scripts (write_16.sh, write_path_16.sh) with $carry
# set: unpacks the carried pg-portable.tar.xz once into
# /tmp/webtune-pg-portable and exports PGBIN, LD_LIBRARY_PATH, WRK and PATH
# for scripts/bench's scripts.
pgroot=/tmp/webtune-pg-portable
if [ ! -d "$pgroot/usr/lib/postgresql" ]; then
  mkdir -p "$pgroot" && tar -C "$pgroot" -xJf "$carry/pg-portable.tar.xz" && chmod -R a+rX "$pgroot"
fi
PGBIN="$(ls -d "$pgroot"/usr/lib/postgresql/*/bin | sort -V | tail -1)"
export PGBIN LD_LIBRARY_PATH="$pgroot/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" WRK="$pgroot/usr/bin/wrk"
export PATH="$PGBIN:$PATH"
