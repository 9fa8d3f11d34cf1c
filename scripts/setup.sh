#!/usr/bin/env bash
# Installs the Debian packages paddle.c builds and tests with. Idempotent:
# only missing packages are installed. As root it runs apt-get; otherwise it
# prints the exact command to run.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang-format python3
  libdnnl-dev        # GEMM and convolution (oneDNN)
  ocl-icd-opencl-dev # Debian's dnnl-config.cmake requires OpenCL (only a recommends)
  libcjson-dev       # safetensors headers, Program files, configs
  zlib1g-dev         # gzipped datasets
  libcmocka-dev      # unit test assertions
  valgrind           # the unit tests of ctest label valgrind
  libopenmpi-dev openmpi-bin  # multi-host collective backend
  libzmq3-dev        # parameter-server transport
  libopenblas-dev    # only for the GEMM comparison bench
  iproute2 util-linux # ip netns and unshare: the two-host launcher test
  dataset-fashion-mnist # the Fashion-MNIST example's test data (30 MB)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "setup: installing ${missing[*]}"
  bash -c "$cmd"
else
  echo "setup: missing packages: ${missing[*]}"
  echo "setup: run as root:"
  echo "  sudo bash -c '$cmd'"
  exit 1
fi
