"""torch.trn: the device module of the trn backend (CUDA-like API).

One device index is one logical core of the software accelerator. Streams and
events are torch.Stream / torch.Event, so torch.accelerator works as well.
"""

from __future__ import annotations

import contextlib
from typing import Any, Union

import torch

from trnscope import _C

_DeviceLike = Union[torch.device, str, int, None]
_initialized = False


def _index(device: _DeviceLike) -> int:
    """Device index of `device`; -1 for None (the current device)."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "trn":
        raise ValueError(f"expected a trn device, got {device}")
    return -1 if device.index is None else device.index


def _resolved(device: _DeviceLike) -> int:
    index = _index(device)
    return _C.current_device() if index < 0 else index


def _lazy_init() -> None:
    global _initialized
    if not _initialized:
        _C.device_count()  # raises on a malformed TRN_VISIBLE_CORES
        _initialized = True


def is_available() -> bool:
    try:
        _lazy_init()
        return _C.device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    return _initialized


def _is_in_bad_fork() -> bool:
    """True in a child forked after the trn runtime started (torch.cuda's name):
    device use there raises; start workers with 'spawn' or 'forkserver'."""
    return _C._is_in_bad_fork()


def device_count() -> int:
    _lazy_init()
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    index = _index(device)
    if index >= 0:
        _C.set_device(index)


def get_device_name(device: _DeviceLike = None) -> str:
    return f"trn logical core {_resolved(device)} (software accelerator)"


class device:
    """Context manager that makes `device` current and restores the previous one."""

    def __init__(self, device: _DeviceLike):
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.idx)

    def __exit__(self, *args: Any) -> None:
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.prev_idx)


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for every command queued on `device` (None: the current device, as
    torch.cuda.synchronize). Raises the first kernel failure since the last
    synchronizing call."""
    _C.synchronize(_resolved(device))


class Stream(torch.Stream):
    """An in-order queue of commands on one core (a torch.Stream of type trn)."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any):
        if kwargs:  # torch.Stream(stream_id=..., device_index=..., device_type=...)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("trn", _resolved(device)), priority=priority)


class Event(torch.Event):
    """A point in a stream (a torch.Event of type trn); always records timestamps.

    Waiting on an event always puts the host thread to sleep (torch.cuda's
    blocking=True behaviour), so both values of `blocking` are honoured as far as
    results go; interprocess events do not exist on trn and are rejected.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise ValueError(
                "torch.trn.Event(interprocess=True): trn events cannot be shared between "
                "processes (every process has its own software device); use interprocess=False"
            )
        return super().__new__(
            cls, device=torch.device("trn", _C.current_device()), enable_timing=enable_timing
        )


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, as torch.Stream(device_type=...) takes it


def _wrap_stream(index: int, stream_id: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=index, device_type=_PRIVATEUSE1)


def current_stream(device: _DeviceLike = None) -> Stream:
    index = _resolved(device)
    return _wrap_stream(index, _C.current_stream_id(index))


def default_stream(device: _DeviceLike = None) -> Stream:
    return _wrap_stream(_resolved(device), 0)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        _C.set_stream(stream.device_index, stream.stream_id)


@contextlib.contextmanager
def stream(stream: torch.Stream | None):
    """Make `stream` current on its device (and that device current) inside the block."""
    if stream is None:
        yield
        return
    prev_device = _C.current_device()
    prev_stream = _C.current_stream_id(stream.device_index)
    _C.set_device(stream.device_index)
    _C.set_stream(stream.device_index, stream.stream_id)
    try:
        yield
    finally:
        _C.set_stream(stream.device_index, prev_stream)
        _C.set_device(prev_device)


# ---- Memory -------------------------------------------------------------------------------
def memory_stats(device: _DeviceLike = None) -> dict:
    return dict(_C.memory_stats(_index(device)))


def memory_allocated(device: _DeviceLike = None) -> int:
    return _C.memory_stats(_index(device))["allocated_bytes"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return _C.memory_stats(_index(device))["peak_allocated_bytes"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return _C.memory_stats(_index(device))["reserved_bytes"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    _C.empty_cache()


# ---- Random numbers -------------------------------------------------------------------------
def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _C.manual_seed(-1, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    _C.seed(-1)


def seed_all() -> None:
    for i in range(device_count()):
        _C.seed(i)


def initial_seed() -> int:
    return _C.initial_seed(-1)


def get_rng_state(device: _DeviceLike = "trn") -> torch.Tensor:
    return _C.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "trn") -> None:
    _C.set_rng_state(_index(device), new_state)


def get_rng_state_all() -> list:
    return [_C.get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list) -> None:
    for i, state in enumerate(new_states):
        _C.set_rng_state(i, state)


def get_amp_supported_dtype() -> list:
    return [torch.float16, torch.bfloat16]
