#!/usr/bin/env bash
# Installs torch into the given Python environment without pulling a CUDA build by accident.
# - a torch that already imports is kept as it is;
# - with an NVIDIA driver present, the regular (CUDA) wheel is installed;
# - otherwise the CPU build torch==2.13.0 is installed (on this kind of machine pip finds it on
#   local disk, so no multi-GB download happens).
set -euo pipefail
py=${1:-python3}
if "$py" -c "import torch" >/dev/null 2>&1; then
  echo "torch $("$py" -c 'import torch; print(torch.__version__)') already installed; keeping it"
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  "$py" -m pip install -q "torch>=2.4"
else
  "$py" -m pip install -q "torch==2.13.0" || "$py" -m pip install -q --index-url https://download.pytorch.org/whl/cpu "torch>=2.4"
fi
