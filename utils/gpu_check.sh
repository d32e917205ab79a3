#!/bin/sh
# The CUDA backend's GPU checks (docs/cuda-backend.md, "On a GPU").
#
#   utils/gpu_check.sh --prepare DIR   on this machine: builds DIR and
#                                      DIR.tar.xz (needs `make build`; no GPU)
#   utils/gpu_check.sh DIR[.tar.xz]    on the GPU machine: runs the checks
#
# On the GPU machine the executables find OpenBLAS and libomp in DIR/lib and
# cuBLAS in the Python environment's NVIDIA wheels (or on LD_LIBRARY_PATH).
set -e
here=$(cd "$(dirname "$0")" && pwd)
if [ "$1" = "--prepare" ]; then
  exec python3 "$here/gpu_check.py" prepare "$2" \
    --weftc "$here/../build/bin/weftc" --models "$here/../../shared/models" \
    --data "$here/../data/tinyshakespeare.tokens"
fi
case "$1" in
*.tar.xz)
  tar xJf "$1" -C "$(dirname "$1")"
  dir=$(cd "${1%.tar.xz}" && pwd) ;;
*) dir=$(cd "$1" && pwd) ;;
esac
cublas=$(python3 -c "
import glob, site, sys
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in sorted(glob.glob(root + '/nvidia/**/libcublas.so.*', recursive=True)):
        print(hit.rsplit('/', 1)[0]); sys.exit()
" 2>/dev/null || true)
LD_LIBRARY_PATH="$dir/lib${cublas:+:$cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
start=$(date +%s)
status=0
python3 "$dir/gpu_check.py" run "$dir" || status=$?
echo "gpu_check: $(( $(date +%s) - start )) s, exit $status"
echo "bench (GPT-2 small tokens/s and MFU beside PyTorch): not built yet"
exit $status
