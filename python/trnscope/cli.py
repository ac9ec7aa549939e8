"""Console entry point `trnscope`: runs the C++ analyzer shipped in trnscope/bin.

The analyzer is a standalone executable (docs/analyzer.md); this shim only finds it
and replaces the Python process with it, so exit codes and signals are the binary's.
"""

from __future__ import annotations

import os
import sys


def binary_path() -> str:
    """Path of the bundled `trnscope` executable."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "trnscope")


def main() -> None:
    exe = binary_path()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            f"trnscope: the analyzer binary is missing ({exe}); build it with `make build`\n")
        sys.exit(2)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
