#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build, test and benchmark, skipping those present.
# Usage: scripts/install-deps.sh [--tests]   (as root, or with sudo available)
#   --tests also installs what only the test suite uses: PyTorch (CPU), for sluice.torch and the training example;
#   matplotlib, for the comparison script's plot; clang-format, clang-tidy and flake8, for scripts/lint.sh.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  libeigen3-dev nlohmann-json3-dev
  coinor-libcbc-dev doctest-dev libbenchmark-dev
  python3-dev pybind11-dev python3-numpy python3-pytest python3-setuptools python3-pip python3-venv
  libopenmpi-dev openmpi-bin
)
if [ "${1:-}" = "--tests" ]; then packages+=(python3-torch python3-matplotlib clang-format clang-tidy-16 flake8); fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
