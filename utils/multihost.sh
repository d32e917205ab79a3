#!/usr/bin/env bash
# Weft on several hosts made of network namespaces on this machine.
#
#   sudo utils/multihost.sh [--hosts N] [--build DIR] [--steps S] [--keep]
#
# Builds N hosts (default 4): network namespaces weft<PID>-h0..h<N-1>, each
# with an eth0 (10.77.0.<i+1>/24) on a veth pair whose other end is a port
# of a bridge in a switch namespace, weft<PID>-sw; all traffic stays in
# them, and runs at once do not meet.
# MPI runs over TCP between them with MPICH's own launcher (Hydra's
# `mpiexec -f HOSTFILE`), whose ssh is replaced by a script that enters
# the host's namespace (with its own hostname, so that MPI sees separate
# nodes); UCX is held to TCP (UCX_TLS=tcp,self), since its shared-memory
# transport would carry the ranks' traffic around the links.
#
# Each host's eth0 is shaped with tc's token bucket (tbf) to a link
# profile, in turn:
#   unshaped     the veth pair as it is: its latency (α) is measured here
#   ib-like      400 Mbit/s: InfiniBand NDR (400 Gb/s a NIC) scaled 1:1000
#   roce-like    200 Mbit/s: 200 Gb/s RoCE scaled 1:1000
# This kernel has neither sch_netem nor sch_fq, so a profile cannot add
# latency: every profile keeps the veth's own, and they differ in
# bandwidth (the term that dominates a gradient all-reduce). The rates
# are well below what the ranks push through an unshaped veth (about
# 2 Gbit/s a rank with four ranks on two cores), so that the shaped link,
# not the CPU, is what is measured.
#
# The hosts share this machine's cores, which MPI cannot see (each is a
# node to it), so the ranks run with WEFT_SHARED_CORES=1 and yield while
# they wait. UCX 1.13's TCP transport can hang in MPI_Finalize
# (openucx/ucx#8738); with WEFT_FINALIZE_TIMEOUT=0 the ranks leave without
# it once all have finished. With more than two ranks a host (--hosts 2 or
# 3), Hydra sometimes takes a rank that leaves so before the others for a
# failure and kills the job (seen in 2 to 4 of 6 runs of a small MPI
# program), after the losses are logged; four hosts have run clean.
#
# For each profile the script
#   1. trains a GPT for S steps (default 20) with pp=2, dp=2, tp=2 on 8 ranks,
#      two a host, and compares every step's loss with the same program's
#      on one host (weft-run);
#   2. measures an all-reduce, an all-gather and a send-recv of 4 B to
#      4 MiB over one rank a host (weft-calibrate --collectives) and prints
#      them beside the planner's predictions for a cluster of N nodes with
#      that link (weft-plan --collective-times), with the relative errors
#      and their median.
# Exits 1 when a run fails or a loss differs. Nothing is written into the
# repository; the scratch directory is removed unless --keep.
set -euo pipefail

hosts=4
build=""
steps=20
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
  --hosts) hosts=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --keep) keep=1; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "multihost.sh: error: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$(cd "${build:-$root/build}" 2>/dev/null && pwd) || {
  echo "multihost.sh: error: no build directory (run 'make build' first)" >&2
  exit 2
}
fail() { echo "multihost.sh: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces and tc)"
case "$hosts" in 2 | 3 | 4) ;; *) fail "--hosts must be 2, 3 or 4, not '$hosts'" ;; esac
case "$steps" in '' | *[!0-9]*) fail "--steps must be a whole number" ;; esac
for tool in ip tc mpiexec unshare python3; do
  command -v $tool >/dev/null || fail "'$tool' is not on PATH"
done
# Read the whole version text first: under pipefail, `grep -q` closing the
# pipe at the first match can fail mpiexec with SIGPIPE.
version=$(mpiexec --version 2>/dev/null || true)
[[ "$version" == *HYDRA* ]] ||
  fail "mpiexec is not MPICH's Hydra (the host-file launch below is Hydra's)"
for tool in weftc weft-run weft-plan weft-calibrate; do
  [ -x "$build/bin/$tool" ] || fail "$build/bin/$tool is missing (run 'make build')"
done

work=$(mktemp -d /tmp/weft-multihost.XXXXXX)
net=weft$$
namespaces() {
  for i in $(seq 0 $((hosts - 1))); do echo $net-h$i; done
  echo $net-sw
}
cleanup() {
  for ns in $(namespaces); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  if [ $keep = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# --- the hosts and their switch ---
ip netns add $net-sw
ip -n $net-sw link add br0 type bridge
ip -n $net-sw link set br0 up
for i in $(seq 0 $((hosts - 1))); do
  ip netns add $net-h$i
  ip link add eth0 netns $net-h$i type veth peer name port$i netns $net-sw
  ip -n $net-sw link set port$i master br0 up
  ip -n $net-h$i addr add 10.77.0.$((i + 1))/24 dev eth0
  ip -n $net-h$i link set eth0 up
  ip -n $net-h$i link set lo up
done
# Hydra starts its proxy on a host as `LAUNCHER [options] HOST COMMAND`.
cat >"$work/launch" <<EOF
#!/usr/bin/env bash
while [[ "\$1" == -* ]]; do shift; done
host=\$1; shift
name=h\$(( \${host##*.} - 1 ))
exec ip netns exec $net-\$name unshare --uts sh -c "hostname \$name; \$*"
EOF
chmod +x "$work/launch"
for slots in 1 2; do
  for i in $(seq 0 $((hosts - 1))); do echo "10.77.0.$((i + 1)):$slots"; done >"$work/hosts$slots"
done

# on_hosts SECONDS SLOTS RANKS COMMAND...: an MPI job across the hosts,
# SLOTS ranks a host, launched from h0 and stopped after SECONDS.
on_hosts() {
  local seconds=$1 slots=$2 ranks=$3
  shift 3
  timeout "$seconds" ip netns exec $net-h0 unshare --uts \
    env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0,lo WEFT_SHARED_CORES=1 \
    WEFT_FINALIZE_TIMEOUT=0 \
    sh -c 'hostname h0; exec "$@"' sh \
    mpiexec -f "$work/hosts$slots" -launcher ssh -launcher-exec "$work/launch" \
    -iface eth0 -n "$ranks" "$@"
}

shape() { # shape PROFILE
  local rule=""
  case "$1" in
  unshaped) ;;
  ib-like) rule="rate 400mbit" ;;
  roce-like) rule="rate 200mbit" ;;
  esac
  for i in $(seq 0 $((hosts - 1))); do
    ip netns exec $net-h$i tc qdisc del dev eth0 root 2>/dev/null || true
    [ -z "$rule" ] || ip netns exec $net-h$i tc qdisc add dev eth0 root tbf \
      $rule burst 32kb latency 400ms
  done
}
fabric() { case "$1" in ib-like) echo infiniband ;; roce-like) echo roce ;; esac; }
rate_gbps() { # the profile's bandwidth in GB/s, as cluster files give it
  case "$1" in ib-like) echo 0.05 ;; roce-like) echo 0.025 ;; esac
}

# --- the training program and its one-host losses ---
ranks=8
python3 "$here/gen_gpt2.py" --layers 4 --hidden 32 --heads 2 --seq 16 --batch 4 \
  -o "$work/gpt.onnx" >/dev/null
"$build/bin/weftc" "$work/gpt.onnx" --train --mesh pp=2,dp=2,tp=2 \
  --parallel dp,megatron --microbatches 2 --schedule 1f1b -o "$work/gpt3d"
train=(--data "$root/data/tinyshakespeare.tokens" --steps "$steps" --lr 3e-3
  --warmup 2 --seed 7)
"$build/bin/weft-run" --timeout 600 "$work/gpt3d" "${train[@]}" \
  --log "$work/one-host.jsonl" >"$work/one-host.out" 2>&1 ||
  fail "the one-host run failed: $(tail -1 "$work/one-host.out")"

sizes=4,65536,1048576,4194304
status=0
for profile in unshaped ib-like roce-like; do
  shape $profile
  echo "== $profile"
  log="$work/$profile.jsonl"
  # Hydra can take a rank that leaves without finalizing a little before
  # its host's other for a failed one, after the last step (2 of about 20
  # runs): such a run, whose every step was logged, is run once more.
  trained=0
  for attempt in 1 2; do
    rm -f "$log"
    if on_hosts 900 2 $ranks "$work/gpt3d" "${train[@]}" --log "$log" \
      >"$work/$profile.train.out" 2>&1; then
      trained=1
      break
    fi
    if [ "$attempt" = 1 ] && [ -f "$log" ] &&
      [ "$(wc -l <"$log")" = "$steps" ] &&
      grep -q "BAD TERMINATION" "$work/$profile.train.out"; then
      echo "multihost.sh: $profile: Hydra ended the run after its last step; running it again" >&2
    else
      break
    fi
  done
  if [ "$trained" = 0 ]; then
    echo "training on $hosts hosts: FAILED: $(tail -1 "$work/$profile.train.out")"
    status=1
  else
    python3 - "$work/one-host.jsonl" "$log" "$hosts" <<'EOF' || status=1
import json, sys
def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]
one, many = losses(sys.argv[1]), losses(sys.argv[2])
if len(one) != len(many):
    print(f"training on {sys.argv[3]} hosts: FAILED: {len(many)} steps logged, {len(one)} expected")
    sys.exit(1)
worst = max(abs(a - b) / abs(a) for a, b in zip(one, many))
same = "bit-identical" if one == many else f"largest relative difference {worst:.1e}"
print(f"training pp=2,dp=2,tp=2 on {sys.argv[3]} hosts, 8 ranks, {len(one)} steps: "
      f"losses {same} to one host's (first {one[0]:.4f}, last {one[-1]:.4f})")
sys.exit(0 if worst <= 1e-5 else 1)
EOF
  fi

  on_hosts 600 1 $hosts "$build/bin/weft-calibrate" --collectives $sizes \
    >"$work/$profile.measured" 2>"$work/$profile.calibrate.err" ||
    fail "measuring the collectives ($profile) failed: $(tail -1 "$work/$profile.calibrate.err")"
  if [ $profile = unshaped ]; then
    # α of the veth link: the 4-byte all-reduce, a ring's 2(n-1) steps.
    alpha_us=$(python3 -c "
import json, sys
row = next(r for r in map(json.loads, open(sys.argv[1]))
           if r['collective'] == 'all-reduce' and r['bytes'] == 4)
print(f\"{row['seconds'] / (2 * (row['ranks'] - 1)) * 1e6:.2f}\")" "$work/$profile.measured")
    send_us=$(python3 -c "
import json, sys
row = next(r for r in map(json.loads, open(sys.argv[1]))
           if r['collective'] == 'send-recv' and r['bytes'] == 4)
print(f\"{row['seconds'] * 1e6:.2f}\")" "$work/$profile.measured")
    echo "measured on the unshaped veth: a collective step's latency (α) $alpha_us us, a send's $send_us us"
    continue
  fi
  cat >"$work/$profile.json" <<EOF
{"name": "$profile", "nodes": $hosts, "gpus_per_node": 1,
 "gpu": {"model": "a rank (its compute is not priced here)", "peak_bf16_tflops": 0.1,
         "peak_fp32_tflops": 0.1, "memory_gb": 4, "memory_bandwidth_gbps": 10},
 "send_latency_us": $send_us,
 "intra_node": {"bandwidth_gbps": 1, "latency_us": $alpha_us},
 "inter_node": {"fabric": "$(fabric $profile)", "nics_per_node": 1,
                "nic_bandwidth_gbps": $(rate_gbps $profile), "latency_us": $alpha_us}}
EOF
  "$build/bin/weft-plan" --cluster "$work/$profile.json" --collective-times $sizes \
    >"$work/$profile.predicted"
  python3 - "$work/$profile.predicted" "$work/$profile.measured" "$work/errors" <<'EOF'
import json, sys
def rows(path):
    return {(r["collective"], r["bytes"]): r for r in map(json.loads, open(path))}
predicted, measured = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'collective':<11} {'bytes':>8} {'ranks':>5} {'predicted ms':>13} {'measured ms':>12} {'error':>7}")
with open(sys.argv[3], "a") as errors:
    for key, row in measured.items():
        guess = predicted[key]["seconds"]
        error = (guess - row["seconds"]) / row["seconds"]
        errors.write(f"{abs(error)}\n")
        print(f"{key[0]:<11} {key[1]:>8} {row['ranks']:>5} {guess * 1e3:>13.3f} "
              f"{row['seconds'] * 1e3:>12.3f} {error:>+7.0%}")
EOF
done
python3 - "$work/errors" <<'EOF'
import statistics, sys
errors = [float(line) for line in open(sys.argv[1])]
print(f"median |error| of the planner's collective times over both profiles: "
      f"{statistics.median(errors):.0%} ({len(errors)} measurements)")
EOF
exit $status
