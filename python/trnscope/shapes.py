"""Static shapes for compiled trn programs: bucket sizes, pad, unpad.

A compiled program is specialized to its input sizes (as on Trainium), so
varying sequence lengths mean recompiles. Pad the varying dim up to a few
bucket sizes, mask or slice the padding away, and one program per bucket
serves every length:

    BUCKETS = trnscope.shapes.buckets(16, 512)          # [16, 32, ..., 512]
    x_pad, info = trnscope.shapes.pad_to_bucket(x, 1, BUCKETS)
    y = compiled(x_pad, info.mask(device=x.device))    # padded positions masked
    y = trnscope.shapes.unpad(y, info)                 # back to the true length
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


def buckets(min_size: int, max_size: int, step: int | None = None) -> list[int]:
    """Bucket sizes covering [min_size, max_size], ascending.

    Without `step`: powers of two, from the largest power of two <= min_size
    up to the first one >= max_size (log2 buckets, at most 2x padding). With
    `step`: multiples of step from the first one >= min_size up to the first
    one >= max_size (bounded padding, more buckets).
    """
    if min_size < 1 or max_size < min_size:
        raise ValueError(
            f"buckets: expected 1 <= min_size <= max_size, got {min_size} and {max_size}"
        )
    if step is not None:
        if step < 1:
            raise ValueError(f"buckets: step must be >= 1, got {step}")
        first = -(-min_size // step) * step
        out = list(range(first, max_size, step))
        return out + [-(-max_size // step) * step]
    b = 1 << (min_size.bit_length() - 1)
    out = [b]
    while b < max_size:
        b *= 2
        out.append(b)
    return out


@dataclass(frozen=True)
class PadInfo:
    """What pad_to_bucket did: the true length along `dim` and the bucket."""

    length: int
    bucket: int
    dim: int

    def mask(self, device=None, dtype: torch.dtype = torch.bool) -> torch.Tensor:
        """[bucket] tensor: True (1) at the `length` real positions, False (0) at padding."""
        return (torch.arange(self.bucket) < self.length).to(device=device, dtype=dtype)

    def attention_bias(self, device=None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[bucket] additive bias: 0 at real keys, -inf at padded ones (add to attention scores)."""
        bias = torch.zeros(self.bucket, dtype=dtype)
        bias[self.length :] = float("-inf")
        return bias.to(device)


def pad_to_bucket(
    x: torch.Tensor, dim: int, buckets: Sequence[int], value: float = 0
) -> tuple[torch.Tensor, PadInfo]:
    """Pads `x` along `dim` with `value` up to the smallest bucket >= its size.

    Returns (padded, info); unpad(y, info) slices a result back. Raises a
    ValueError when the size exceeds the largest bucket.
    """
    dim = dim % x.dim()
    n = x.shape[dim]
    fits = [b for b in sorted(buckets) if b >= n]
    if not fits:
        raise ValueError(
            f"pad_to_bucket: size {n} along dim {dim} exceeds the largest bucket {max(buckets)}"
        )
    b = fits[0]
    info = PadInfo(length=n, bucket=b, dim=dim)
    if b == n:
        return x, info
    shape = list(x.shape)
    shape[dim] = b
    padded = x.new_full(shape, value)
    padded.narrow(dim, 0, n).copy_(x)
    return padded, info


def unpad(y: torch.Tensor, info: PadInfo, dim: int | None = None) -> torch.Tensor:
    """The first info.length entries of `y` along `dim` (default: the padded dim), a view."""
    return y.narrow(info.dim if dim is None else dim, 0, info.length)


__all__ = ["PadInfo", "buckets", "pad_to_bucket", "unpad"]
