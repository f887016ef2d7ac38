"""What of this checkout travels to a benchmark machine, and whether it fits.

The `device` tool's machine receives the working tree (tracked files that exist and
untracked ones git does not ignore) plus the ignored paths a call carries, and refuses
more than 64 MiB. `tests/test_repository.py` and `scripts/gpu_pack.sh` both ask this
script, so the rule is written once.

    python3 scripts/tree_size.py                      # the tree against 64 MiB
    python3 scripts/tree_size.py --plus '.whl/*.whl'  # and the wheels a call carries

Prints one line (sizes, and the three largest files when over); exit 1 when it does not fit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a benchmark machine accepts.
LIMIT = 64 * 2**20
MIB = 2**20


def tree_sizes(root: Path = ROOT) -> dict[Path, int]:
    """The size of each file of the working tree that travels (a tracked file moved aside
    does not, a link travels as a link)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape").split("\0")
    paths = (root / p for p in listed if p)
    return {p: p.lstat().st_size for p in paths if p.is_symlink() or p.is_file()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plus", action="append", default=[], metavar="GLOB",
                        help="ignored files a call carries as well (relative to the checkout)")
    parser.add_argument("--limit", type=int, default=LIMIT, help="bytes (default 64 MiB)")
    args = parser.parse_args(argv)
    sizes = tree_sizes()
    tree = sum(sizes.values())
    plus = sum(p.stat().st_size for pattern in args.plus for p in ROOT.glob(pattern) if p.is_file())
    total = tree + plus
    line = f"working tree {tree / MIB:.1f} MiB"
    if args.plus:
        line += f" + {' '.join(args.plus)} {plus / MIB:.1f} MiB = {total / MIB:.1f} MiB"
    line += f" (limit {args.limit / MIB:g} MiB)"
    if total >= args.limit:
        largest = sorted(sizes, key=sizes.get, reverse=True)[:3]
        print(f"{line}: too large to travel; largest: "
              + ", ".join(f"{p.relative_to(ROOT)} ({sizes[p] / MIB:.1f} MiB)" for p in largest), file=sys.stderr)
        return 1
    print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
