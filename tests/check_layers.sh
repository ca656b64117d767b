#!/usr/bin/env bash
# libcmt's rooms include only the rooms below them, so the flow hooks -> interposer -> engine ->
# config / cuda -> common runs one way; the engine's three copiers (device, peer, host) stand side
# by side over the parts they share and never include each other; and the engine sees of the
# configuration only the option table (no TOML, no machine identity) and of CUDA only the driver
# table (never the runtime's symbols).
set -euo pipefail
src=${1:?usage: check_layers.sh SOURCE_DIR}/interpose
engine="engine/shared engine/device engine/peer engine/host"
declare -A may_include=(
  [common]="common"
  [cuda]="common cuda"
  [config]="common config"
  [engine/shared]="common cuda config engine/shared"
  [engine/device]="common cuda config engine/shared engine/device"
  [engine/peer]="common cuda config engine/shared engine/peer"
  [engine/host]="common cuda config engine/shared engine/host"
  [interposer]="common cuda config $engine interposer"
  [hooks]="common cuda config $engine interposer hooks"
)
# Headers of a lower room that a room above still may not include.
never_engine="config/profile.h config/tomlpp.h config/fingerprint.h cuda/real_runtime.h"
declare -A never=(
  [engine/shared]=$never_engine
  [engine/device]=$never_engine
  [engine/peer]=$never_engine
  [engine/host]=$never_engine
)
# The room of a path under interpose/: engine's sub-rooms by their folder, the others by theirs.
room_of() {
  case $1 in
    engine/*/*) echo "${1%/*}" ;;
    engine/*) echo "engine" ;;
    */*) echo "${1%%/*}" ;;
    *) echo "$1" ;;
  esac
}
bad=0
while IFS= read -r file; do
  rel=${file#$src/}
  room=$(room_of "$rel")
  if [ -z "${may_include[$room]+x}" ]; then
    echo "FAIL: interpose/$rel is in no known room ($room); add it to tests/check_layers.sh"
    bad=1
    continue
  fi
  while IFS= read -r target; do
    [ -n "$target" ] || continue
    target_room=$(room_of "$target")
    if [ "$target_room" = "$target" ]; then
      echo "FAIL: $rel includes \"$target\" without naming its room"
      bad=1
    elif ! tr ' ' '\n' <<<"${may_include[$room]}" | grep -qx -- "$target_room"; then
      echo "FAIL: $rel ($room) includes $target ($target_room is not below $room)"
      bad=1
    elif tr ' ' '\n' <<<"${never[$room]:-}" | grep -qx -- "$target"; then
      echo "FAIL: $rel ($room) includes $target, which the $room room must not see"
      bad=1
    fi
  done < <(sed -nE 's/^[[:space:]]*#include "([^"]+)".*/\1/p' "$file")
done < <(find "$src" -name '*.h' -o -name '*.cpp' | sort)
[ "$bad" = 0 ] && echo "ok: every include of interpose/ runs down the rooms"
exit "$bad"
