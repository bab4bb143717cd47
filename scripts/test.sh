#!/usr/bin/env bash
# Builds attnsel and runs every test suite: the release build, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency tests under
# ThreadSanitizer. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ATTNSEL_JOBS:-$(nproc)}
cmake --preset default >/dev/null
cmake --build --preset default -j "$jobs"
ctest --preset default
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target attnsel_tests
ctest --preset tsan
