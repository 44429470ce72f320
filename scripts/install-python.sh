#!/usr/bin/env bash
# Installs the Python package `tagflow` into a virtual environment (default
# .venv; it sees Debian's NumPy), building the library first when needed:
#   bash scripts/install-python.sh [venv-dir]
# then: .venv/bin/python -c "import tagflow"
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
bash scripts/setup.sh
bash scripts/build.sh build -DTAGFLOW_PYTHON=ON
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# The build tree above is reused: nothing is compiled again, nothing is
# downloaded (Debian's setuptools builds the wheel).
TAGFLOW_BUILD_DIR="$PWD/build" "$venv/bin/pip" install --quiet --no-build-isolation --no-deps .
echo "tagflow installed in $venv: $venv/bin/python -c 'import tagflow'"
