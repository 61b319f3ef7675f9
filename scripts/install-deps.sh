#!/usr/bin/env bash
# install-deps.sh: installs the Debian 12 packages quorum builds, tests and
# benchmarks with (skips apt when everything is already there).
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ clang-format
  help2man
  libucx-dev ucx-utils
  libhwloc-dev hwloc libpmix-dev libopenmpi-dev openmpi-bin
  libudev-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  slurmd slurmctld slurm-client munge iperf3
  dataset-fashion-mnist python3 python3-matplotlib python3-numpy zlib1g-dev
  python3-dev pybind11-dev python3-pytest python3-torch
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
