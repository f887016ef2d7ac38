#!/usr/bin/env bash
# Get this checkout ready for a lent GPU machine (the `device` tool), or put it back.
#
# The device machine receives the working tree (tracked files and untracked ones git does
# not ignore, plus the ignored paths a call carries) up to 64 MiB, and reaches no network.
# Its image has torch and transformers 5.17 but not Outlines, llguidance or the
# transformers this package needs (>= 5.19), so those travel as wheels, and the tree as
# it stands (about 63 MiB) leaves no room for them. The runs of scripts/gpu_bench.sh use
# random weights and never read the shipped LoRA adapters (about 32 MiB), so this script
# moves them into an ignored folder for the device calls.
#
#   scripts/gpu_pack.sh            # wheels into .whl/, adapters into .adapters-aside/; prints sizes
#   scripts/gpu_pack.sh --restore  # adapters back (also: git checkout -- cad_outlines/data/adapters)
#
# Then one device call (carry [".whl"]), as docs/benchmarks.md "GPU: what a lent session
# runs" gives it.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
adapters=cad_outlines/data/adapters
aside=.adapters-aside

exclude=.git/info/exclude
mkdir -p .git/info
for path in /.whl/ "/$aside/"; do
    grep -qxF "$path" "$exclude" 2>/dev/null || echo "$path" >> "$exclude"
done

if [[ "${1:-}" == "--restore" ]]; then
    if [[ -d "$aside/adapters" ]]; then
        rm -rf "$adapters" && mv "$aside/adapters" "$adapters" && rmdir "$aside"
    fi
    git checkout -- "$adapters"  # whatever the move left out
    echo "gpu_pack: $adapters restored" >&2
    exit 0
fi

# The packages the device image lacks, pinned to what the test suite runs here, for the
# image's Python 3.12 on x86-64 (--no-deps: every one is named).
wheels=(outlines==1.3.3 outlines_core==0.2.14 llguidance==1.9.1 transformers==5.25.0 lark==1.3.1
        genson==1.4.0 diskcache==5.6.3 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
        typing-inspection==0.4.5 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
        referencing==0.37.0 rpds-py==2026.9.1 typing_extensions==4.16.0 rapidfuzz==3.14.6)
platforms=(--platform manylinux2014_x86_64)
for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "${wheels[@]}"

if [[ -d "$adapters" ]]; then
    mkdir -p "$aside" && rm -rf "$aside/adapters" && mv "$adapters" "$aside/adapters"
fi

# What travels: the files of the working tree that exist (the adapters moved aside are
# tracked but absent) and the carried wheels (scripts/tree_size.py, as the tests measure it).
python3 scripts/tree_size.py --plus '.whl/*.whl' || { echo "gpu_pack: too large to travel" >&2; exit 1; }
echo "gpu_pack: ready; run scripts/gpu_pack.sh --restore after the device calls" >&2
