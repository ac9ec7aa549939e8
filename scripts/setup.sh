#!/usr/bin/env bash
# Installs what a fresh machine lacks: Debian packages and the pinned torch.
# Idempotent: does nothing when everything is present.
set -euo pipefail

DEB_PACKAGES=(cmake ninja-build g++ ccache libhwy-dev libfmt-dev libgtest-dev libbenchmark-dev
  libsimdjson-dev libsqlite3-dev sqlite3 zlib1g-dev libcli11-dev chromium
  clang-14 libclang-rt-14-dev)  # clang: the libFuzzer smoke run (make fuzz-smoke)
TORCH_VERSION=2.13.0
PY=${PYTHON:-python3}
# The checks import torch; a stale trnscope entry point (an editable install of a
# checkout that moved) must not make them fail.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

have_torch=$($PY -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)
if [ "$have_torch" != "$TORCH_VERSION" ]; then
  # Pinned: an unpinned or newer torch pulls a multi-GB CUDA build.
  echo "setup: installing torch==$TORCH_VERSION (found '${have_torch:-none}')"
  $PY -m pip install -q -c "$(dirname "$0")/constraints.txt" "torch==$TORCH_VERSION"
fi
# Test dependencies, pinned beside torch (scripts/constraints.txt).
CONSTRAINTS="$(dirname "$0")/constraints.txt"
need=()
for mod in pytest numpy transformers; do
  $PY -c "import $mod" 2>/dev/null || need+=("$mod")
done
# The build backend (pyproject.toml); pip runs it without build isolation.
skbc=$(sed -n 's/^scikit-build-core==//p' "$CONSTRAINTS")
$PY -c "import scikit_build_core as s, sys; sys.exit(s.__version__ != '$skbc')" 2>/dev/null \
  || need+=("scikit-build-core==$skbc")
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  $PY -m pip install -q -c "$CONSTRAINTS" "${need[@]}"
fi
now_torch=$($PY -c "import torch; print(torch.__version__.split('+')[0])")
if [ "$now_torch" != "$TORCH_VERSION" ]; then
  echo "setup: torch is $now_torch after installing test dependencies, expected $TORCH_VERSION" >&2
  exit 1
fi
