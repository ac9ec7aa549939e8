"""Compile records and recompile diagnostics of the trn backend.

Every compile (a new graph, or a known graph with a new input signature) is
recorded: trnscope.compile_stats() returns the records. Signatures are tracked
per graph hash (the structural hash of the aten graph, independent of sizes),
so the recompiles Dynamo makes for new shapes with dynamic=False are seen as
the same graph and explained: which input changed, old -> new shape. Past
config.max_signatures_before_warning signatures for one graph, a warning is
issued once per graph with the observed sizes and a suggested bucket list.

The records are process-wide; any thread may compile (a lock guards them).
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field

from trnscope.compile import config
from trnscope.shapes import buckets

# One input: a tensor's (sizes, strides, dtype name), or a number's
# ("value", type name, value): a scalar input (a SymInt Dynamo lifted, such
# as a cache length) is baked into the program like a size, so its value is
# part of the key.
InputSig = tuple
Signature = tuple[InputSig, ...]


def _is_value(s: InputSig) -> bool:
    return s[0] == "value"


def signature_of(args, unkeyed=()) -> Signature:
    """The cache key of a graph's arguments: tensors (FakeTensors or real) by
    shape, stride and dtype, numbers by value (None at the `unkeyed` indices:
    numbers no program depends on)."""
    sig = []
    for i, a in enumerate(args):
        if hasattr(a, "shape") and hasattr(a, "stride"):
            sig.append(
                (
                    tuple(int(s) for s in a.shape),
                    tuple(int(s) for s in a.stride()),
                    str(a.dtype).removeprefix("torch."),
                )
            )
        else:
            sig.append(("value", type(a).__name__, None if i in unkeyed else a))
    return tuple(sig)


@dataclass
class _GraphHistory:
    signatures: list[Signature] = field(default_factory=list)
    names: list[list[str]] = field(default_factory=list)  # each signature's input names
    warned: bool = False


_lock = threading.Lock()
_records: list[dict] = []
_graphs: dict[int, _GraphHistory] = {}


def _changes(old: Signature, new: Signature, old_names: list[str], names: list[str]) -> list[dict]:
    """What differs between two signatures of one graph, input by input (paired
    by name when both have names: a graph Dynamo made dynamic gains size inputs)."""
    def name(i):
        return names[i] if i < len(names) else f"input{i}"

    if len(old_names) == len(old) and len(names) == len(new):
        before = dict(zip(old_names, old))
        pairs = [(i, before.get(names[i]), b) for i, b in enumerate(new)]
    else:
        pairs = [(i, old[i] if i < len(old) else None, b) for i, b in enumerate(new)]
    changed = []
    for i, a, b in pairs:
        if a is None or a == b:
            continue
        if _is_value(a) or _is_value(b):
            changed.append(
                {
                    "index": i,
                    "name": name(i),
                    "what": "value",
                    "old": a[2] if _is_value(a) else list(a[0]),
                    "new": b[2] if _is_value(b) else list(b[0]),
                }
            )
            continue
        what = "shape" if a[0] != b[0] else ("dtype" if a[2] != b[2] else "stride")
        changed.append(
            {
                "index": i,
                "name": name(i),
                "what": what,
                "old": list(a[0]) if what == "shape" else (a[2] if what == "dtype" else list(a[1])),
                "new": list(b[0]) if what == "shape" else (b[2] if what == "dtype" else list(b[1])),
            }
        )
    if len(old) != len(new):
        changed.append(
            {
                "index": -1,
                "name": "<number of inputs>",
                "what": "count",
                "old": len(old),
                "new": len(new),
            }
        )
    return changed


def _named(sig: Signature, names: list[str]) -> dict[str, InputSig]:
    """The signature's inputs by name (by position where the names do not fit)."""
    if len(names) != len(sig):
        names = [f"input{i}" for i in range(len(sig))]
    return dict(zip(names, sig))


def _varying_sizes(hist: _GraphHistory) -> dict[str, list[int]]:
    """{'name dim d': sorted distinct sizes} for every input dim that varied, and
    {'name': sorted distinct values} for every number input that did (a size
    Dynamo made symbolic). Inputs are paired by name: a graph Dynamo made dynamic
    gains size inputs."""
    seen: dict[str, list[InputSig]] = {}
    for sig, names in zip(hist.signatures, hist.names):
        for name, s in _named(sig, names).items():
            seen.setdefault(name, []).append(s)
    out: dict[str, list[int]] = {}
    for name, sigs in seen.items():
        if any(_is_value(s) for s in sigs):
            values = {s[2] for s in sigs if _is_value(s) and isinstance(s[2], int)}
            if len(values) > 1:
                out[name] = sorted(values)
            continue
        shapes = {s[0] for s in sigs}
        if len(shapes) < 2 or len({len(sh) for sh in shapes}) != 1:
            continue
        for d in range(len(next(iter(shapes)))):
            sizes = sorted({sh[d] for sh in shapes})
            if len(sizes) > 1:
                out[f"{name} dim {d}"] = sizes
    return out


def _is_weight(name: str) -> bool:
    """A module's parameter or buffer, by Dynamo's input name (L['self']...
    _parameters['weight'] -> l_self_..._parameters_weight_)."""
    return "_parameters_" in name or "_buffers_" in name


def _many_signatures_warning(graph_hash: int, hist: _GraphHistory) -> str:
    """What varied across the graph's signatures and what to do about it: weights
    that change shape (one module's code run for layers of several sizes) are
    not padded; data sizes are, to buckets."""
    varying = _varying_sizes(hist)
    weights = {k: v for k, v in varying.items() if _is_weight(k)}
    data = {k: v for k, v in varying.items() if not _is_weight(k)}
    text = (
        f"trn: graph {graph_hash:016x} was compiled for {len(hist.signatures)} input "
        f"signatures (more than trnscope.compile.config.max_signatures_before_warning="
        f"{config.max_signatures_before_warning})."
    )
    if weights:
        follow = f" (the other inputs' sizes follow: {data})" if data else ""
        text += (
            f" Weights change shape {weights}: the same code runs for layers of different "
            f"sizes{follow}, so each layer's shapes get a program, compiled once and cached; "
            f"padding does not apply (raise max_signatures_before_warning to silence this)."
        )
    elif data:
        tensors = {k: v for k, v in data.items() if " dim " in k}
        text += f" Observed sizes {data}. Pad to buckets to keep a few programs"
        if tensors:
            text += (
                f", e.g. trnscope.shapes.pad_to_bucket(x, dim, buckets) with buckets "
                f"{ {k: buckets(min(v), max(v)) for k, v in tensors.items()} }"
            )
        text += " (docs/compile.md, static shapes)."
    if not varying:
        text += " The inputs differ in strides or dtypes, not sizes (see changed_inputs)."
    return text


def note_compile(record: dict, graph_hash: int, sig: Signature, names: list[str]) -> dict:
    """Adds `record` (keys filled by the backend) with the recompile analysis."""
    with _lock:
        hist = _graphs.setdefault(graph_hash, _GraphHistory())
        record["graph_hash"] = f"{graph_hash:016x}"
        record["signature"] = [
            {"value": s[2], "dtype": s[1]}
            if _is_value(s)
            else {"shape": list(s[0]), "stride": list(s[1]), "dtype": s[2]}
            for s in sig
        ]
        record["input_names"] = list(names)
        record["recompile"] = bool(hist.signatures)
        record["changed_inputs"] = (
            _changes(hist.signatures[-1], sig, hist.names[-1], names) if hist.signatures else []
        )
        if sig not in hist.signatures:
            hist.signatures.append(sig)
            hist.names.append(list(names))
        record["num_signatures"] = len(hist.signatures)
        _records.append(record)
        warn = None
        if len(hist.signatures) > config.max_signatures_before_warning and not hist.warned:
            hist.warned = True
            warn = _many_signatures_warning(graph_hash, hist)
    if warn:
        warnings.warn(warn, UserWarning, stacklevel=3)
    return record


def compile_stats() -> list[dict]:
    """One dict per trn compile in this process, oldest first.

    Keys: graph_hash, signature (per input: shape, stride, dtype; a number
    input: value, dtype, value None when no program depends on it), input_names,
    duration_s, num_kernels, kernels (names), eager_nodes (aten targets run
    eagerly inside the program), eager_reasons (why, one per eager node),
    fallback (None, or why the whole graph runs
    eagerly), recompile, changed_inputs (index, name, what, old, new),
    num_signatures (of this graph so far), specialized (a dynamic-shape graph
    compiled for concrete sizes at run time), artifact (path or None).
    """
    with _lock:
        return [dict(r) for r in _records]


def reset_compile_stats() -> None:
    """Forget the records and the per-graph signature history (and its warnings)."""
    with _lock:
        _records.clear()
        _graphs.clear()
