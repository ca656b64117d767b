#!/usr/bin/env bash
# libcmt's rooms include only the rooms below them, so the flow hooks -> interposer -> engine ->
# config / cuda -> common runs one way; and the engine sees of the configuration only the option
# table (no TOML, no machine identity) and of CUDA only the driver table (never the runtime's symbols).
set -euo pipefail
src=${1:?usage: check_layers.sh SOURCE_DIR}/interpose
declare -A may_include=(
  [common]="common"
  [cuda]="common cuda"
  [config]="common config"
  [engine]="common cuda config engine"
  [interposer]="common cuda config engine interposer"
  [hooks]="common cuda config engine interposer hooks"
)
# Headers of a lower room that a room above still may not include.
declare -A never=(
  [engine]="config/profile.h config/tomlpp.h config/fingerprint.h cuda/real_runtime.h"
)
bad=0
for dir in "$src"/*/; do
  room=$(basename "$dir")
  if [ -z "${may_include[$room]+x}" ]; then
    echo "FAIL: interpose/$room is not a known room; add it to tests/check_layers.sh"
    bad=1
    continue
  fi
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    target_room=${target%%/*}
    if [ "$target_room" = "$target" ]; then
      echo "FAIL: ${file#$src/} includes \"$target\" without naming its room"
      bad=1
    elif ! grep -qw "$target_room" <<<"${may_include[$room]}"; then
      echo "FAIL: ${file#$src/} ($room) includes $target ($target_room is not below $room)"
      bad=1
    elif grep -qw "$target" <<<"${never[$room]:-}"; then
      echo "FAIL: ${file#$src/} ($room) includes $target, which the $room room must not see"
      bad=1
    fi
  done < <(grep -H '#include "' "$dir"*.h "$dir"*.cpp 2>/dev/null || true)
done
[ "$bad" = 0 ] && echo "ok: every include of interpose/ runs down the rooms"
exit "$bad"
