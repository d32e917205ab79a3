#!/bin/sh
# The CUDA backend's GPU checks and bench (docs/cuda-backend.md, "On a GPU").
#
#   utils/gpu_check.sh --prepare DIR   here (`make build` first, and the
#                                      weft package importable:
#                                      PYTHONPATH=build/python; no GPU):
#                                      builds DIR/checks (utils/gpu_check.py)
#                                      and DIR/bench (bench/gpu_train.py) and
#                                      packs DIR.tar.xz, what a GPU machine
#                                      gets
#   utils/gpu_check.sh DIR[.tar.xz]    on the GPU machine: runs the checks,
#                                      then the bench; exits non-zero when a
#                                      check fails, 69 without a GPU
#
# There the executables find OpenBLAS and libomp in DIR/*/lib, and cuBLAS,
# cuDNN and NVRTC (which cuDNN's runtime-compiled attention kernels need) in
# the Python environment's NVIDIA wheels (or on LD_LIBRARY_PATH).
set -e
here=$(cd "$(dirname "$0")" && pwd)
if [ "$1" = "--prepare" ]; then
  rm -rf "$2"
  mkdir -p "$2"
  python3 "$here/gpu_check.py" prepare "$2/checks" \
    --models "$here/../../shared/models" \
    --data "$here/../data/tinyshakespeare.tokens"
  python3 "$here/../bench/gpu_train.py" prepare "$2/bench"
  dir=$(cd "$2" && pwd)
  tar cJf "$dir.tar.xz" -C "$(dirname "$dir")" "$(basename "$dir")"
  echo "to carry: $dir.tar.xz ($(du -m "$dir.tar.xz" | cut -f1) MiB)"
  exit 0
fi
case "$1" in
*.tar.xz)
  tar xJf "$1" -C "$(dirname "$1")"
  dir=$(cd "${1%.tar.xz}" && pwd) ;;
*) dir=$(cd "$1" && pwd) ;;
esac
nvidia=$(python3 -c "
import glob, site
found = []
for library in ('libcublas.so.*', 'libcudnn.so.*', 'libnvrtc.so.*'):
    hits = [hit for root in site.getsitepackages() + [site.getusersitepackages()]
            for hit in sorted(glob.glob(root + '/nvidia/**/' + library, recursive=True))]
    if hits and hits[0].rsplit('/', 1)[0] not in found:
        found.append(hits[0].rsplit('/', 1)[0])
print(':'.join(found))
" 2>/dev/null || true)
LD_LIBRARY_PATH="$dir/checks/lib${nvidia:+:$nvidia}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
start=$(date +%s)
status=0
python3 "$dir/checks/gpu_check.py" run "$dir/checks" || status=$?
echo "gpu_check: checks $(( $(date +%s) - start )) s, exit $status"
if [ "$status" -ne 69 ]; then
  python3 "$dir/bench/gpu_train.py" run "$dir/bench" || echo "gpu_check: the bench failed"
fi
echo "gpu_check: $(( $(date +%s) - start )) s in all, exit $status"
exit $status
