#!/usr/bin/env bash
# Installs the Debian 12 packages attnsel needs to build and test, when they are missing.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git python3
          libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libhwy-dev
          libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev ccache libdlpack-dev
          libopenmpi-dev openmpi-bin  # MPI: decode context parallelism across processes
          # The Python package's tests (PyTorch is the reference the CPU kernel is compared with).
          python3-pytest python3-numpy python3-torch python3-setuptools)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all build dependencies present"
