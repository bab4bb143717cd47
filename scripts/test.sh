#!/usr/bin/env bash
# Builds attnsel and runs every suite, stopping at the first failure:
#   1. the release build and all its tests (CUDA code compiles where nvcc exists; GPU tests
#      skip without a device);
#   2. the installation as others consume it (scripts/check-install.sh: find_package,
#      pkg-config, add_subdirectory, the example plugin);
#   3. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (the CPU kernels
#      for this machine's SIMD target only);
#   4. the concurrency tests under ThreadSanitizer;
#   5. a short libFuzzer run over the JSON readers (scripts/fuzz.sh: 10 s, a process per job).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ATTNSEL_JOBS:-$(nproc)}
export ATTNSEL_JOBS=$jobs
# ccache keys on paths relative to the checkout, so another clone reuses the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
# The suite includes the MPI runs of decode context parallelism: a build without MPI fails here.
export ATTNSEL_MPI=${ATTNSEL_MPI:-ON}
started=$SECONDS
step() { echo; echo "== test.sh: $* ($((SECONDS - started)) s so far)"; }

step "release build and tests"
cmake --preset default >/dev/null
cmake --build --preset default -j "$jobs"
ctest --preset default

step "install and consume"
ATTNSEL_BUILD_DIR=build bash scripts/check-install.sh

step "AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan

step "ThreadSanitizer (concurrency tests)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target attnsel_tests
ctest --preset tsan

step "fuzzing the JSON readers"
bash scripts/fuzz.sh "${ATTNSEL_FUZZ_SECONDS:-10}"

step "all suites passed"
