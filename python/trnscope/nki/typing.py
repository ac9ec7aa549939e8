"""`nki.typing`: the annotation objects NKI kernels write (`x: nt.tensor[[M, N], nl.float32]`).

Python never evaluates annotations of local variables; those on arguments or at module
level are evaluated, so `tensor[...]` must exist. It describes, it checks nothing.
"""

from __future__ import annotations


class tensor:  # noqa: N801 (NKI's name)
    """`tensor[shape, dtype]` or `tensor[[shape], dtype]`: an annotation, never a value."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype

    def __class_getitem__(cls, item):
        shape, dtype = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
        return cls(shape, dtype)

    def __repr__(self):
        return f"nki.typing.tensor[{self.shape!r}, {self.dtype!r}]"


__all__ = ["tensor"]
