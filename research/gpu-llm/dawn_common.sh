# Sourced by run_dawn.sh and run_encoder_dawn.sh (the GPU machine's Dawn runs).
# Needs carry, root, out and work set by the caller.
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}

# Node, the npm package `webgpu` and the webtune server from the carried folder, unpacked once into $work.
unpack_dawn() {
  [ -x "$work/node" ] || { xz -dc "$carry/dawn/node.xz" > "$work/node" && chmod +x "$work/node"; }
  [ -d "$work/webgpu" ] || tar xJf "$carry/dawn/webgpu.tar.xz" -C "$work"
  [ -x "$work/webtune" ] || { xz -dc "$carry/webtune.xz" > "$work/webtune" && chmod +x "$work/webtune"; }
}

# serve_bg BIN DB_URL PORT LOG: `BIN serve` on 127.0.0.1:PORT in the background (its log in LOG),
# waited for until it answers (10 s at most); its pid in $served.
serve_bg() {
  "$1" serve --addr "127.0.0.1:$3" --database-url "$2" > "$4" 2>&1 &
  served=$!
  for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$3/v1/models" > /dev/null && break; sleep 0.1; done
}

# serve_and_run DB_URL PORT LOG SCRIPT ARGS...: `webtune serve` on 127.0.0.1:PORT (its log in LOG)
# until SCRIPT (a research/web-bench file) has run in Node with Dawn against it, with the built
# runtime and ARGS; returns the script's exit status.
# NODE_FLAGS: flags for Node itself (for example --trace-gc).
serve_and_run() {
  local db=$1 port=$2 log=$3 script=$4; shift 4
  serve_bg "$work/webtune" "$db" "$port" "$log"
  local srv=$served
  "$work/node" ${NODE_FLAGS:-} "$root/research/web-bench/$script" --server "http://127.0.0.1:$port" \
    --runtime "$root/client-runtime/web/dist/webtune.js" --webgpu "$work/webgpu/index.js" "$@"
  local rc=$?
  kill $srv 2>/dev/null; wait $srv 2>/dev/null
  return $rc
}
