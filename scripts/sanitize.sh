#!/usr/bin/env bash
# Builds the CPU tests with sanitizers and runs them: address (AddressSanitizer and
# UndefinedBehaviorSanitizer, undefined behaviour fatal, leaks reported) or thread
# (ThreadSanitizer). Run after scripts/setup.sh has installed the dependencies. CI runs both.
# usage: scripts/sanitize.sh address|thread [GTEST_FILTER]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:?usage: scripts/sanitize.sh address|thread [GTEST_FILTER]}
filter=${2:-*}
build=${CMT_BUILD_DIR:-$root/build}-$kind
extra=()
[ -d "$root/.deps/include" ] && extra+=("-DCMAKE_INCLUDE_PATH=$root/.deps/include")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMT_SANITIZE="$kind" \
  -DCMT_BUILD_BENCH=OFF -DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" "${extra[@]}" >/dev/null
cmake --build "$build" --target cmt_cpu_tests
# The engine leaks on purpose what a DMA may still touch (a broken staging ring) and what lives
# for the whole process (the interposer, the logger): those are suppressed, nothing else.
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
# The address run shuffles the tests: ctest runs each test in a process of its own, and this run
# in one process is where a test that needs what an earlier one left, or leaves state to a later
# one, shows. The seed is said here (gtest's brief output does not); CMT_TEST_SEED=N repeats it.
order=()
if [ "$kind" = address ]; then
  seed=${CMT_TEST_SEED:-$((RANDOM % 99999 + 1))}
  echo "sanitize.sh: tests in a shuffled order, seed $seed (CMT_TEST_SEED=$seed repeats it)"
  order+=(--gtest_shuffle "--gtest_random_seed=$seed")
fi
"$build/tests/cmt_cpu_tests" --gtest_filter="$filter" --gtest_brief=1 "${order[@]}"
echo "sanitize.sh: the CPU tests passed under $kind"
