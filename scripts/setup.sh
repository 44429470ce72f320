#!/usr/bin/env bash
# Installs the Debian packages tagflow builds with, when they are missing.
# Run as root on Debian 12; does nothing when everything is present.
set -euo pipefail

packages=(
  cmake make g++ pkg-config
  libtbb-dev       # oneTBB
  libspdlog-dev    # logging (brings libfmt-dev)
  libfmt-dev
  libgtest-dev     # GoogleTest
  libcli11-dev     # command line
  libopenblas-dev libopenblas-pthread-dev  # CPU matrix products
  libdnnl-dev      # oneDNN: CPU convolutions (Note [Convolution on the CPU])
  ocl-icd-opencl-dev  # oneDNN's CMake package looks for OpenCL (a recommends of libdnnl-dev)
  zlib1g-dev       # gzip-compressed IDX data files
  nlohmann-json3-dev  # safetensors headers
  dataset-fashion-mnist  # the tutorials' data set
  ccache           # used when present
  clang-format     # the style check in CI
  python3          # tests/readme: the README's C++ examples, extracted at configure time
  python3-dev pybind11-dev python3-numpy libdlpack-dev  # the Python module (python/)
  python3-pytest   # its tests (tests/python)
  python3-venv python3-setuptools python3-wheel  # scripts/install-python.sh: venv, offline pip install
  python3-torch    # PyTorch 1.13: its bits for 16-bit safetensors files, DLPack with it (tests)
  openmpi-bin libopenmpi-dev  # training across processes (mpirun, nn/dist/mpi_communicator.cc)
  clang-14 libclang-rt-14-dev  # the fuzz targets: clang++-14 and libFuzzer (scripts/fuzz.sh)
  chromium-headless-shell  # the profile page's browser test (tests/tools/profile_page_browser_test.py)
  fonts-dejavu-core  # its screenshots' text
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "tagflow setup: missing packages: ${missing[*]}" >&2
  echo "Install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "tagflow setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
