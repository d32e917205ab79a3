#!/usr/bin/env bash
# Runs the README's two commands (`make demo`, then `make check`) in a clean
# Debian 12 root filesystem, as on a fresh machine of this kind, and reports
# each command's exit code and time. Not part of CI (it downloads and builds
# everything: about an hour on 2 cores); run it before resolving an issue
# that changes dependencies or the build.
#
# The root filesystem comes from debootstrap (Debian's registry, the mirror
# the host's apt sources name), with the host's apt and pip settings. Of the
# machine image it gets only what the image itself ships: make, git,
# ca-certificates and procps (Debian's), the Python interpreter on PATH
# (pyenv's 3.11, copied without the packages installed into it since), the
# CUDA toolkit (bind-mounted read-only) and the image's wheel folder
# (PIP_FIND_LINKS). The checkout is a clone of HEAD; ../shared
# is bind-mounted read-only beside it.
#
#   sudo utils/check_fresh_machine.sh [--root DIR] [--keep] [--command CMD]...
#
# --root DIR: where the root filesystem goes (default /var/tmp/weft-fresh;
# a base system left there by --keep is reused); --keep: leave it in place
# afterwards; --command CMD: run CMD in the checkout instead of the README's
# commands (repeatable). Each command's log is DIR.<n>.log. Last, the
# checkout's `git status` must be clean: runs never write into the repo.
set -euo pipefail

root=/var/tmp/weft-fresh
keep=0
commands=()
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --command) commands+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--root DIR] [--keep] [--command CMD]..." >&2; exit 2 ;;
  esac
done
[ ${#commands[@]} -gt 0 ] || commands=("make demo" "make check")
[ "$(id -u)" = 0 ] || { echo "error: run as root (debootstrap, chroot, mount)" >&2; exit 2; }
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
shared=$(dirname "$repo")/shared
python_home=$(python3 -c 'import sys; print(sys.base_prefix)')

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -l "${mounts[i]}" 2>/dev/null || true
  done
  [ "$keep" = 0 ] || return 0
  # Never delete through a mount still in place (../shared and /dev are
  # bound in, possibly from the same filesystem).
  if awk -v root="$root/" 'index($2, root) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    echo "error: mounts remain under $root; left it in place" >&2
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
bind() { # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounts+=("$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "== debootstrap bookworm from $mirror into $root"
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -5 "$root.debootstrap.log"; exit 1; }
fi

# The host's registry settings.
rm -f "$root"/etc/apt/sources.list
mkdir -p "$root/etc/apt/sources.list.d" "$root/etc/apt/apt.conf.d" "$root/etc/ssl/certs"
cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
cp /etc/apt/sources.list "$root/etc/apt/" 2>/dev/null || true
cp /etc/apt/apt.conf.d/99* "$root/etc/apt/apt.conf.d/" 2>/dev/null || true
# The host's trust store may hold a CA of its own (a proxy's); as a local CA
# it survives the bundle being rebuilt when ca-certificates is installed.
mkdir -p "$root/usr/local/share/ca-certificates"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-bundle.crt"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
cp /etc/pip.conf "$root/etc/" 2>/dev/null || true
cp /etc/resolv.conf "$root/etc/"

# The image's base tools that the README's commands take for granted (the
# image ships them; the project installs the rest).
image_tools="make git ca-certificates procps"
chroot "$root" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $image_tools" >"$root.tools.log" 2>&1 ||
  { tail -5 "$root.tools.log"; exit 1; }
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"

# The image's interpreter, without what was installed into it since.
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$root$python_home"
(cd "$python_home" && tar --exclude="./${site#"$python_home"/}" -cf - .) | tar -xf - -C "$root$python_home"
mkdir -p "$root$site"
chroot "$root" "$python_home/bin/python3" -m ensurepip >/dev/null

bind /proc "$root/proc"
bind /sys "$root/sys"
bind /dev "$root/dev"
[ -d /usr/local/cuda ] && bind "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda" ro
[ -d /opt/wheels ] && bind /opt/wheels "$root/opt/wheels" ro
[ -d "$shared" ] && bind "$shared" "$root/work/shared" ro
rm -rf "$root/work/weft"
git clone -q "$repo" "$root/work/weft"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH="$python_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    $(env | grep -E '^PIP_' | tr '\n' ' ') \
    /bin/bash -c "cd /work/weft && $1"
}

status=0
n=0
for command in "${commands[@]}"; do
  n=$((n + 1))
  log="$root.$n.log"
  start=$(date +%s)
  if in_root "$command" >"$log" 2>&1; then code=0; else code=$?; status=1; fi
  seconds=$(( $(date +%s) - start ))
  echo "== $command: exit $code in $seconds s (log: $log)"
  tail -n 4 "$log" | sed 's/^/   /'
done
# Runs never write into the checkout.
changed=$(git -C "$root/work/weft" status --porcelain)
if [ -z "$changed" ]; then
  echo "== git status: clean"
else
  echo "== git status: the commands left files in the checkout:"
  echo "$changed" | sed 's/^/   /'
  status=1
fi
exit $status
