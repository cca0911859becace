#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails (listing the files) when a C++ file of the checkout (tracked, or new and not ignored by
# .gitignore) differs from what clang-format makes of it under .clang-format. Fix with:
# tools/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.cc')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not clang-formatted: %s\n' "${bad[@]}" >&2
  echo "check-format: run tools/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files clang-formatted"
