#!/bin/sh
# The CUDA backend's GPU checks and bench (docs/cuda-backend.md, "On a GPU"),
# made so that a lent GPU's minutes are not wasted.
#
#   utils/gpu_check.sh --prepare [DIR]  here (`make build` first, and the
#                                       weft package importable:
#                                       PYTHONPATH=build/python; no GPU):
#                                       builds DIR/checks (utils/gpu_check.py)
#                                       and DIR/bench (bench/gpu_train.py)
#                                       and packs DIR.tar.gz, what a GPU
#                                       machine gets. DIR defaults to
#                                       build/gpu-check (ignored by git); a
#                                       bundle over 32 MiB is refused.
#   utils/gpu_check.sh DIR[.tar.gz]     on the GPU machine: the phases below,
#                                       most important first, each in its
#                                       own time box (350 s in all); exits
#                                       non-zero when one fails, 69 without
#                                       a GPU
#
# Phases: the checks (every shared model and the bundled GPT's training
# against the CPU backend's results), the device counters of a GPT-2-small
# training step (--device-stats), compute-sanitizer's memcheck on the
# bundled GPT's step, the bench. Output is unbuffered and, when $OUT names a
# folder (the device tool's), also written to $OUT/gpu_check.log.
#
# There the executables find libomp in DIR/*/lib, and cuBLAS, cuDNN and
# NVRTC (which cuDNN's runtime-compiled attention kernels need) in the
# Python environment's NVIDIA wheels (or on LD_LIBRARY_PATH).
set -e
here=$(cd "$(dirname "$0")" && pwd)
max_bundle_mib=32
if [ "$1" = "--prepare" ]; then
  dir=${2:-$here/../build/gpu-check}
  rm -rf "$dir" "$dir.tar.gz"
  mkdir -p "$dir"
  python3 "$here/gpu_check.py" prepare "$dir/checks" \
    --models "$here/../../shared/models" \
    --data "$here/../data/tinyshakespeare.tokens"
  python3 "$here/../bench/gpu_train.py" prepare "$dir/bench"
  cp "$0" "$dir/gpu_check.sh"
  dir=$(cd "$dir" && pwd)
  tar czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
  bytes=$(wc -c < "$dir.tar.gz")
  mib=$(( (bytes + 1048575) / 1048576 ))
  if [ "$bytes" -gt $(( max_bundle_mib * 1048576 )) ]; then
    echo "error: the bundle $dir.tar.gz is $mib MiB, over $max_bundle_mib" >&2
    exit 1
  fi
  echo "to carry: $dir.tar.gz ($bytes bytes, $mib MiB of at most $max_bundle_mib)"
  exit 0
fi
[ $# -eq 1 ] || { echo "usage: $0 --prepare [DIR] | $0 DIR[.tar.gz]" >&2; exit 2; }

# Everything below also goes to $OUT/gpu_check.log, line by line.
if [ -n "$OUT" ] && [ -z "$GPU_CHECK_LOGGED" ]; then
  mkdir -p "$OUT"
  export GPU_CHECK_LOGGED=1
  set +e
  { "$0" "$@" 2>&1; echo $? > "$OUT/.gpu_check_status"; } | tee "$OUT/gpu_check.log"
  status=$(cat "$OUT/.gpu_check_status")
  rm -f "$OUT/.gpu_check_status"
  exit "$status"
fi
export PYTHONUNBUFFERED=1

case "$1" in
*.tar.gz)
  tar xzf "$1" -C "$(dirname "$1")"
  dir=$(cd "${1%.tar.gz}" && pwd) ;;
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
LD_LIBRARY_PATH="$dir/checks/lib:$dir/bench/lib${nvidia:+:$nvidia}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

start=$(date +%s)
status=0
# phase NAME SECONDS COMMAND...: runs COMMAND for at most SECONDS; a
# failure or a timeout is reported and remembered, and the next phase runs.
phase() {
  name=$1 seconds=$2
  shift 2
  begin=$(date +%s)
  echo "gpu_check: phase $name (at most $seconds s)"
  set +e
  timeout --kill-after=5 "$seconds" "$@"
  code=$?
  set -e
  case $code in
  0) echo "gpu_check: phase $name passed in $(( $(date +%s) - begin )) s" ;;
  124|137) echo "gpu_check: phase $name ran out of its $seconds s"; status=1 ;;
  69) echo "gpu_check: no CUDA device here"; exit 69 ;;
  *) echo "gpu_check: phase $name failed (exit $code)"; status=1 ;;
  esac
}

phase checks 150 python3 "$dir/checks/gpu_check.py" run "$dir/checks"
phase counters 45 "$dir/bench/train_bf16" --init-seed 1 \
  --data "$dir/bench/data.tokens" --steps 4 --lr 3e-4 --print-every 4 \
  --device-stats
sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
if [ -x "$sanitizer" ]; then
  phase memcheck 75 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$dir/checks/gpt/train_bf16" --data "$dir/checks/gpt/data.tokens" \
    --steps 2 --lr 3e-3
else
  echo "gpu_check: phase memcheck: no $sanitizer here"
  status=1
fi
phase bench 80 python3 "$dir/bench/gpu_train.py" run "$dir/bench" --steps 6 \
  --torch-modes eager
echo "gpu_check: phase nccl: not built yet (issue 40): nothing to run"
echo "gpu_check: $(( $(date +%s) - start )) s in all, exit $status"
exit $status
