#!/usr/bin/env bash
# Fails when a C++ line changed since a commit (default: the last one, so
# CI checks the commit it runs on, with any uncommitted edits) is not as
# clang-format (LLVM style, .clang-format) would write it.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check_format: skipped: no commit '$base' to compare with"
  exit 0
fi
changes=$(git diff -U0 "$base" -- '*.cpp' '*.h' | clang-format-diff-14 -p1)
if [ -n "$changes" ]; then
  echo "$changes"
  echo "check_format: C++ lines changed since $base are not clang-formatted;" \
    "fix: git diff -U0 $base -- '*.cpp' '*.h' | clang-format-diff-14 -p1 -i"
  exit 1
fi
echo "check_format: C++ lines changed since $base are clang-formatted"
