#!/usr/bin/env bash
# Builds the libFuzzer target for the JSON readers (config.json, --attention-config,
# --kv-transfer-config) with clang, AddressSanitizer and UndefinedBehaviorSanitizer, and runs
# it over the seed corpus in fuzz/corpus/hf_config for a short while, in one fuzzing process
# per job (libFuzzer's fork mode).
#
#   scripts/fuzz.sh [SECONDS]      (default 30)
#
# Environment: CXX_FUZZ / CC_FUZZ (default clang++-14 / clang-14), ATTNSEL_FUZZ_BUILD_DIR
# (default build-fuzz), ATTNSEL_JOBS (build jobs and fuzzing processes, default 2). New inputs
# the fuzzer finds go to a scratch directory, so the committed corpus only changes by hand; a
# crash leaves its input in the build directory as fuzz-crash-* and makes the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build=${ATTNSEL_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${ATTNSEL_JOBS:-2}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++-14}" -DCMAKE_C_COMPILER="${CC_FUZZ:-clang-14}" \
  -DATTNSEL_BUILD_FUZZ=ON -DATTNSEL_BUILD_TESTS=OFF -DATTNSEL_BUILD_BENCH=OFF -DATTNSEL_BUILD_TOOLS=OFF \
  -DATTNSEL_CUDA=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target hf_config_fuzz

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ATTNSEL_LOG_LEVEL=off
"$build/fuzz/hf_config_fuzz" -fork="$jobs" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$build/fuzz-" "$scratch" fuzz/corpus/hf_config
