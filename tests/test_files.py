"""atomic_write: symlinks are written through; no temp file survives an interruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from cad_outlines import files
from cad_outlines.files import atomic_write, read_text

from testdata import ROOT


def test_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.txt"
    target.write_bytes(b"old\r\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target.name)  # relative link
    atomic_write(link, "new\r\n")
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_bytes() == b"new\r\n" and read_text(link) == "new\r\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_interrupted_write_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_text("old", encoding="utf-8")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "new")
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_sigterm_during_cli_write_cleans_up(tmp_path):
    # A real SIGTERM while `apply -o` is writing: the command exits, the old file stays
    # and no temp file is left (SIGTERM's default action would skip every clean-up).
    (tmp_path / "doc.txt").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "p.prog").write_text('<program><copy lines="2-2"/></program>', encoding="utf-8")
    (tmp_path / "out.txt").write_text("old", encoding="utf-8")
    script = textwrap.dedent("""
        import os, signal, sys
        from cad_outlines import files
        real_fsync = files.os.fsync
        def fsync(fd):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-write
            real_fsync(fd)
        files.os.fsync = fsync
        from cad_outlines.cli import main
        sys.exit(main(["apply", "p.prog", "doc.txt", "-o", "out.txt"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # 143, as a shell reports it
    assert "interrupted" in done.stderr
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt", "out.txt", "p.prog"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process is untouched
