#!/usr/bin/env bash
# Checks attnsel as others consume it: installs it into a temporary prefix, then
#   1. checks what was installed (headers, libattnsel.so with SONAME = major, libattnsel.a,
#      the CMake package, attnsel.pc, the command) and that the public API is exported;
#   2. builds the example plugin (examples/plugin) against the installation with
#      find_package(attnsel), and runs the installed `attnsel select` / `attnsel run` with it;
#   3. builds and runs tests/consumers/consumer.cpp through find_package (shared and
#      static), pkg-config, and add_subdirectory;
#   4. builds the C API's test program (tests/capi/capi_test.c) with -std=c99 -Wall -Werror
#      against the installed header and runs it; imports the installed Python package with
#      the system's python3 and runs `python3 -m attnsel select`.
# Exits non-zero on the first failure.
#
# Environment: ATTNSEL_BUILD_DIR (default: build, configured with the default preset when
# missing), ATTNSEL_JOBS (default: nproc), ATTNSEL_CHECK_KEEP=1 keeps the temporary
# directory, ATTNSEL_CHECK_SKIP_ADD_SUBDIRECTORY=1 skips step 3's source build (slow).
# (Pipelines into grep read their whole input: grep -q would exit at the first match, and
# under pipefail the writer's SIGPIPE would then fail the check at random.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${ATTNSEL_JOBS:-$(nproc)}
build=${ATTNSEL_BUILD_DIR:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/attnsel-check-install.XXXXXX")
prefix=$work/prefix
if [[ "${ATTNSEL_CHECK_KEEP:-0}" != 1 ]]; then trap 'rm -rf "$work"' EXIT; else echo "check-install: keeping $work"; fi

step() { echo; echo "== check-install: $*"; }
fail() { echo "check-install: FAILED: $*" >&2; exit 1; }
# expect OUTPUT_FILE REGEX DESCRIPTION
expect() { grep -Eq -- "$2" "$1" || { cat "$1" >&2; fail "$3 (expected /$2/)"; }; }

step "exports are marked (scripts/annotate-exports.py --check)"
python3 scripts/annotate-exports.py --check

step "build and install into $prefix"
if [[ ! -f "$build/CMakeCache.txt" ]]; then cmake --preset default >/dev/null; fi
# Everything: in Ninja the name "attnsel" is the command's file at the build root, not the
# shared library target, so `--target attnsel` would leave libattnsel.so stale.
cmake --build "$build" -j "$jobs"
cmake --install "$build" --prefix "$prefix" >/dev/null

step "installed files"
libdir=""
for d in lib lib64 lib/*-linux-gnu; do
  if [[ -f "$prefix/$d/libattnsel.so" ]]; then libdir=$d; break; fi
done
[[ -n "$libdir" ]] || fail "libattnsel.so not installed"
major=$(sed -n 's/^#define ATTNSEL_VERSION_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/attnsel/version.h")
for f in bin/attnsel include/attnsel/registry.hpp include/attnsel/plugin.h include/attnsel/attnsel.h include/attnsel/plugin_helper.hpp \
         include/attnsel/plugin_loader.hpp include/attnsel/export.hpp include/attnsel/version.h \
         "$libdir/libattnsel.a" "$libdir/libattnsel.so" "$libdir/libattnsel.so.$major" \
         "$libdir/cmake/attnsel/attnselConfig.cmake" "$libdir/cmake/attnsel/attnselConfigVersion.cmake" \
         "$libdir/cmake/attnsel/attnselTargets.cmake" "$libdir/cmake/attnsel/attnselStaticTargets.cmake" \
         "$libdir/pkgconfig/attnsel.pc"; do
  [[ -e "$prefix/$f" ]] || fail "$f not installed"
done
[[ -d "$prefix/$libdir/attnsel/plugins" ]] || fail "$libdir/attnsel/plugins not installed"
readelf -d "$prefix/$libdir/libattnsel.so" | grep "SONAME.*\[libattnsel.so.$major\]" >/dev/null || fail "SONAME is not libattnsel.so.$major"
# Hidden visibility: the public API is exported, the internals are not.
nm -DC --defined-only "$prefix/$libdir/libattnsel.so" >"$work/exports.txt"
expect "$work/exports.txt" "attnsel::load_plugin\(" "load_plugin is exported"
expect "$work/exports.txt" "attnsel::make_platform\(" "make_platform is exported"
expect "$work/exports.txt" "typeinfo for attnsel::ImportError" "ImportError's type information is exported"
if grep -E " attnsel::(plugin|backends|platforms|log)::" "$work/exports.txt"; then fail "internal symbols are exported"; fi
if grep -E " (fmt|spdlog|hwy|nlohmann)::" "$work/exports.txt" | grep -v " [UVW] " >/dev/null; then
  fail "dependencies' symbols are exported"
fi
# Every function the C header declares is exported, under its C name.
sed -n 's/^ATTNSEL_C_API [^(]*\b\(attnsel_[a-z0-9_]*\)(.*/\1/p' "$prefix/include/attnsel/attnsel.h" | sort -u >"$work/c_api.txt"
[[ -s "$work/c_api.txt" ]] || fail "no ATTNSEL_C_API declarations found in attnsel.h"
nm -D --defined-only "$prefix/$libdir/libattnsel.so" | awk '{print $NF}' | sort -u >"$work/c_exports.txt"
missing_c=$(comm -23 "$work/c_api.txt" "$work/c_exports.txt")
[[ -z "$missing_c" ]] || fail "C API functions not exported: $missing_c"
echo "exported: $(grep -c " T " "$work/exports.txt") functions, $(wc -l <"$work/c_api.txt") of them the C API's"

step "the example plugin, built against the installation with find_package(attnsel)"
cmake -S examples/plugin -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/example" -j "$jobs" >/dev/null
cmake --install "$work/example" >/dev/null
plugin=$work/example/libattnsel_example_plugin.so
[[ -f "$prefix/$libdir/attnsel/plugins/libattnsel_example_plugin.so" ]] || fail "the example plugin was not installed into attnsel's plugin directory"
if ldd "$plugin" | grep libattnsel >/dev/null; then fail "the example plugin links libattnsel (a plugin must not)"; fi

attnsel=$prefix/bin/attnsel
export ATTNSEL_LOG_LEVEL=warn
"$attnsel" select --plugin "$plugin" --platform cuda:9.0 --attention-backend EXAMPLE_ATTN >"$work/out.txt"
expect "$work/out.txt" "Chosen: +EXAMPLE_ATTN \(libattnsel_example_plugin.so:attnsel_plugin_init\)" \
  "select --attention-backend EXAMPLE_ATTN chooses the plugin's backend"
# On the CPU every layer runs on CPU_ATTN; the example's second init symbol overrides it.
"$attnsel" --plugin "$plugin:attnsel_example_as_cpu_attn" select --platform cpu --mode runnable >"$work/out.txt"
expect "$work/out.txt" "Chosen: +CPU_ATTN \(libattnsel_example_plugin.so:attnsel_example_as_cpu_attn\)" \
  "the example overrides CPU_ATTN and passes runnable validation"
# A bare name is found in the installation's plugin directory.
"$attnsel" select --plugin libattnsel_example_plugin.so --platform cuda:9.0 --attention-backend example_attn >"$work/out.txt"
expect "$work/out.txt" "Chosen: +EXAMPLE_ATTN" "a bare plugin name is found in <libdir>/attnsel/plugins"
ATTNSEL_PLUGINS="$plugin" "$attnsel" select --platform cuda:9.0 --attention-backend EXAMPLE_ATTN >"$work/out.txt"
expect "$work/out.txt" "Chosen: +EXAMPLE_ATTN" "ATTNSEL_PLUGINS loads the plugin at start-up"
if "$attnsel" select --plugin "$work/missing.so" >"$work/out.txt" 2>&1; then fail "a missing --plugin was accepted"; fi
expect "$work/out.txt" "missing.so' does not exist" "a missing --plugin is an error naming it"

# The main job on this host with the example's kernel in place of CPU_ATTN, checked against
# the double-precision reference (a small shape: the example kernel is plain, not fast).
"$attnsel" run --plugin "$plugin:attnsel_example_as_cpu_attn" --platform cpu --mode runnable --num-heads 8 --num-kv-heads 2 \
  --head-size 64 --num-layers 2 --batch 2 --context 96 --decode-steps 3 --no-ceilings --no-progress \
  >"$work/out.txt" 2>&1 || { cat "$work/out.txt" >&2; fail "attnsel run with the example plugin"; }
cat "$work/out.txt"
expect "$work/out.txt" "libattnsel_example_plugin.so:attnsel_example_as_cpu_attn" "attnsel run uses the example's kernel"
expect "$work/out.txt" "passed" "the example's output matches the reference"

step "consumer through find_package (shared and static)"
cmake -S tests/consumers/find_package -B "$work/find_package" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/find_package" -j "$jobs" >/dev/null
"$work/find_package/consumer_shared" "$plugin"
ldd "$work/find_package/consumer_shared" | grep "$prefix/$libdir/libattnsel.so.$major" >/dev/null ||
  fail "consumer_shared does not use the installed libattnsel.so.$major"
"$work/find_package/consumer_static" "$plugin"

step "consumer through pkg-config"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
pkg-config --exists attnsel || fail "pkg-config does not find attnsel"
[[ "$(pkg-config --variable=plugindir attnsel)" -ef "$prefix/$libdir/attnsel/plugins" ]] || fail "pkg-config plugindir"
# shellcheck disable=SC2046
c++ -std=c++20 -O1 tests/consumers/consumer.cpp -o "$work/consumer_pkgconfig" $(pkg-config --cflags --libs attnsel) \
    -Wl,-rpath,"$prefix/$libdir"
"$work/consumer_pkgconfig" "$plugin"

if [[ "${ATTNSEL_CHECK_SKIP_ADD_SUBDIRECTORY:-0}" != 1 ]]; then
  step "consumer through add_subdirectory (builds attnsel from source)"
  # Kept in the build directory: the next run rebuilds only what changed, and the paths
  # compilers see stay the same, so ccache serves a rebuild. Unoptimised (no build type):
  # this checks how a parent project builds attnsel, not how fast attnsel runs.
  sub="$(cd "$build" && pwd)/check-install-add-subdirectory"
  cmake -S tests/consumers/add_subdirectory -B "$sub" -G Ninja -DCMAKE_BUILD_TYPE= \
        -DATTNSEL_SOURCE_DIR="$root" -DATTNSEL_CUDA=OFF >/dev/null
  cmake --build "$sub" -j "$jobs" >/dev/null
  "$sub/consumer_shared" "$plugin"
  "$sub/consumer_static" "$plugin"
fi

step "the C API from C99, against the installed header"
cc -std=c99 -Wall -Wextra -Werror -pedantic tests/capi/capi_test.c -o "$work/capi_test" -I"$prefix/include" \
   -L"$prefix/$libdir" -lattnsel -lm -Wl,-rpath,"$prefix/$libdir"
"$work/capi_test" "$plugin"

python=/usr/bin/python3
[[ -x "$python" ]] || python=$(command -v python3)
site=$(find "$prefix" -path '*-packages/attnsel/__init__.py' -print -quit)
[[ -n "$site" ]] || fail "the Python package was not installed"
step "the installed Python package ($python, $(dirname "$(dirname "$site")"))"
[[ -f "$(dirname "$site")/_install_location.py" ]] || fail "the Python package does not know the installed library"
out=$(cd "$work" && PYTHONPATH="$(dirname "$(dirname "$site")")" "$python" -c \
      "import attnsel; print(attnsel.select(platform='cuda:9.0', head_size=72).backend, attnsel.library_path)")
echo "$out"
[[ "$out" == "FLASH_ATTN $prefix/$libdir/libattnsel.so.$major" ]] || fail "the installed package does not select FLASH_ATTN through the installed library"
(cd "$work" && PYTHONPATH="$(dirname "$(dirname "$site")")" "$python" -m attnsel select --platform cpu --json) >"$work/out.txt"
expect "$work/out.txt" '"backend": "CPU_ATTN"' "python3 -m attnsel select"

echo
echo "check-install: all checks passed"
