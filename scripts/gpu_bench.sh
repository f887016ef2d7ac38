#!/usr/bin/env bash
# GPU benchmarks (kernel curve + e2e, with the prompt-lookup sweep) for the shapes of
# Qwen2.5-Coder-0.5B and -1.5B (random weights: with the oracle's program forced, speed does
# not depend on them) on the whole files of the CPU headline, in bfloat16, then bench serve
# (vLLM) for SERVE_PRESET when vLLM is installed.
#
# For a session that is lent a CUDA machine; every output goes into $OUT (JSON, PNG and
# the Markdown tables as .md). Run once on an H200 (2026-11-30, the older defaults: short
# files, qwen2.5-1.5b and -7b): results in docs/benchmarks.md, "GPU (H200)", files in
# docs/bench/gpu_h200/. What a lent session must carry (wheels) and the room it needs:
# docs/benchmarks.md, "GPU: what a lent session runs".
#
#   OUT=/some/dir scripts/gpu_bench.sh            # defaults below
#   OUT=... PRESETS="qwen2.5-0.5b" LIMIT=2 scripts/gpu_bench.sh
#
# Sized for a 15-minute device budget: the 4 Python files of 177-390 lines of the CPU
# headline (tests/fixtures/whole_files_python.jsonl, scripts/make_whole_files.py), kernel
# with 3 trials up to N=512. Each step has its own timeout so that one slow step cannot
# eat the others' time; a step that times out leaves what it wrote so far. The kernel
# curves of all presets run first, then the e2e runs, then bench serve.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:?set OUT to the output folder}
PRESETS=${PRESETS:-"qwen2.5-0.5b qwen2.5-1.5b"}
CORPUS=${CORPUS:-tests/fixtures/whole_files_python.jsonl}
LIMIT=${LIMIT:-4}
# The headline's selection (an empty LINES takes every length, SPLIT=all every file).
LINES=${LINES-151-400}
SPLIT=${SPLIT:-eval}
ORDER=${ORDER:-file}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
# DEADLINE (epoch seconds, optional): no step runs past it, so that a caller with a hard
# wall-clock limit still gets the files of the steps that finished.
DEADLINE=${DEADLINE:-}
DEVICE=${DEVICE:-cuda}     # DEVICE=cpu DTYPE=float32 PRESETS=tiny-qwen: a smoke test without a GPU
DTYPE=${DTYPE:-bfloat16}
# Prompt-lookup baselines of the e2e step (k:n): the sweep of the CPU headline, up to the
# 128-token drafts of full-file apply (verify positions cost next to nothing on a GPU).
PLD=${PLD:-20:3,64:5,128:7}
PROMPT_STYLE=${PROMPT_STYLE:-compact}
# Rows left out: as the CPU headline, and cad_auto (`--forward-cost auto` leaves drafts
# whole on an accelerator, so its row would price a CPU's curve).
SKIP=${SKIP:-outlines,cad_nodraft,cad_nosplice,cad_plain,cad_fixedcost,cad_auto}
# The kernel curves' size (the e2e step uses the trials and max N too); smaller values are
# for the CPU smoke test (tests/test_gpu_script.py), not for results.
KERNEL_PREFIX=${KERNEL_PREFIX:-1024}
KERNEL_MAX_N=${KERNEL_MAX_N:-512}
KERNEL_TRIALS=${KERNEL_TRIALS:-3}
if [[ ! -f "$CORPUS" ]]; then
    echo "gpu_bench: $CORPUS not found; using the test fixture sample" >&2
    CORPUS=tests/fixtures/corpus_sample.jsonl
fi
mkdir -p "$OUT"
# A non-editable install (a wheel) cannot find the repository's fixture tokenizers by itself.
export CAD_OUTLINES_TOKENIZERS=${CAD_OUTLINES_TOKENIZERS:-$PWD/tests/fixtures/tokenizers}
step_timeout() {  # STEP_TIMEOUT, or the seconds left before DEADLINE if fewer
    local t=$STEP_TIMEOUT
    if [[ -n "$DEADLINE" ]]; then
        local left=$(( DEADLINE - $(date +%s) ))
        (( left < t )) && t=$left
    fi
    (( t < 1 )) && t=1
    echo "$t"
}
name=$(basename "$CORPUS" .jsonl)
if ! command -v cad-outlines >/dev/null; then
    # a fresh machine: install this checkout (no network needed with --no-deps)
    python3 -m pip install --quiet --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || true
fi

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
    python3 -c "import platform, torch; from importlib.metadata import version as v; print('python', platform.python_version(), '| torch', torch.__version__, 'cuda', torch.version.cuda, '|', ', '.join(n + ' ' + v(n) for n in ('transformers', 'outlines', 'outlines_core', 'llguidance', 'tokenizers', 'numpy', 'cad-outlines')))"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
    git rev-parse --short HEAD 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1

status=0
for preset in $PRESETS; do
    tag="${preset}_${DEVICE}_${DTYPE}"
    echo "$(date -u +%T) kernel $tag (timeout $(step_timeout) s)" >&2
    timeout "$(step_timeout)" cad-outlines bench kernel --preset "$preset" --device "$DEVICE" --dtype "$DTYPE" \
        --prefix "$KERNEL_PREFIX" --max-n "$KERNEL_MAX_N" --trials "$KERNEL_TRIALS" --seed 0 \
        -o "$OUT/kernel_$tag.json" --plot "$OUT/kernel_$tag.png" > "$OUT/kernel_$tag.md" \
        2> "$OUT/kernel_$tag.log" || status=$?
    if [[ -f "$OUT/kernel_$tag.json" ]]; then
        cad-outlines bench bounds "$CORPUS" --tokenizer tests/fixtures/tokenizers/qwen \
            --kernel "$OUT/kernel_$tag.json" > "$OUT/ceiling_${name}_$tag.md" 2>> "$OUT/kernel_$tag.log" || status=$?
    fi
done
# e2e after every preset's kernel curve: the curves are the shorter steps, so a run cut
# short by DEADLINE still has one for each preset.
for preset in $PRESETS; do
    tag="${preset}_${DEVICE}_${DTYPE}"
    echo "$(date -u +%T) e2e $tag (timeout $(step_timeout) s)" >&2
    timeout "$(step_timeout)" cad-outlines bench e2e "$CORPUS" --preset "$preset" --device "$DEVICE" --dtype "$DTYPE" \
        --limit "$LIMIT" --order "$ORDER" ${LINES:+--lines "$LINES"} --split "$SPLIT" \
        --prompt-style "$PROMPT_STYLE" --skip "$SKIP" \
        --kernel-trials "$KERNEL_TRIALS" --kernel-max-n "$KERNEL_MAX_N" --seed 0 --pld "$PLD" \
        -o "$OUT/e2e_${name}_$tag.json" --plot "$OUT/e2e_${name}_$tag.png" > "$OUT/e2e_${name}_$tag.md" \
        2> "$OUT/e2e_${name}_$tag.log" || status=$?
done
# bench serve last (needs vLLM, which a bare machine may lack: then it is skipped, said
# in the log): N concurrent edits on vLLM, regeneration vs n-gram speculation vs CaD, in
# one process. --kv-cache-gib 0 lets vLLM size the cache from the GPU's free memory; the
# scheduler is timed in process, hence VLLM_ENABLE_V1_MULTIPROCESSING=0.
SERVE_PRESET=${SERVE_PRESET:-qwen2.5-1.5b}
SERVE_EDITS=${SERVE_EDITS:-16}
# Files of up to 6,000 characters (the CPU serving runs'); n-gram speculation at the
# full-file-apply setting, 128 drafted tokens, prompt_lookup_max 7.
SERVE_CORPUS=${SERVE_CORPUS:-tests/fixtures/corpus_sample.jsonl}
SERVE_NGRAM_K=${SERVE_NGRAM_K:-128}
SERVE_NGRAM_MAX=${SERVE_NGRAM_MAX:-7}
serve_tag="${SERVE_PRESET}_${DEVICE}_${DTYPE}"
serve_name=$(basename "$SERVE_CORPUS" .jsonl)
if python3 -c "import vllm" > /dev/null 2>&1; then
    echo "$(date -u +%T) serve $serve_tag (timeout $(step_timeout) s)" >&2
    serve_model="$OUT/models/$serve_tag"
    [[ -d "$serve_model" ]] || python3 -c "import sys; from cad_outlines.tools import models; models.save(sys.argv[1], sys.argv[2], dtype=sys.argv[3])" \
        "$SERVE_PRESET" "$serve_model" "$DTYPE" > "$OUT/serve_${serve_name}_$serve_tag.log" 2>&1 || status=$?
    VLLM_ENABLE_V1_MULTIPROCESSING=0 timeout "$(step_timeout)" python3 -m cad_outlines.bench.serve "$serve_model" \
        "$SERVE_CORPUS" --edits "$SERVE_EDITS" --max-doc-chars 6000 --dtype "$DTYPE" --kv-cache-gib 0 \
        --ngram-k "$SERVE_NGRAM_K" --ngram-max "$SERVE_NGRAM_MAX" \
        --json "$OUT/serve_${serve_name}_$serve_tag.json" --md "$OUT/serve_${serve_name}_$serve_tag.md" \
        --plot "$OUT/serve_${serve_name}_$serve_tag.png" >> "$OUT/serve_${serve_name}_$serve_tag.log" 2>&1 || status=$?
    rm -rf "$OUT/models"  # weights are random and rebuilt from the preset: not an output
else
    echo "$(date -u +%T) serve skipped: vLLM is not installed (pip install 'cad-outlines[vllm]')" >&2
fi
echo "$(date -u +%T) done, status $status" >&2
exit "$status"
