"""The one ``state_dict`` engine: every optimizer describes its state, this module writes and reads it.

A state dict is a flat mapping from string keys to plain numpy values: the
optimizer's config (Python scalars), its counters (int64 scalars) and its state
arrays (copies). It round-trips through ``np.savez`` and
``np.load(..., allow_pickle=False)``, which hands scalars back as 0-d arrays.

Each optimizer lists its entries once, as :class:`Entry` objects (key, accepted
shapes, dtype, bounds); :func:`load_state` checks a mapping against that list in
one place, so that every optimizer refuses the same defects with the same
messages:

- the key set must match exactly, and every config value must equal the
  optimizer's own (a state dict from another configuration is refused);
- counters must be integer scalars in ``[0, 2**63 - 1]``, checked exactly;
- float arrays must have an accepted shape, the exact dtype, and only finite
  values, ``>= 0`` where the entry says so (second moments, accumulators);
- int64 arrays (``last_step``) must lie in ``[0, <a counter>]``.

Everything is checked before anything is returned, and the returned arrays are
fresh C-contiguous copies: the optimizer swaps them in only after the whole load
has been accepted, so a refused load leaves it exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

import numpy as np

from sparse_opt._arrays import INT64_MAX, first_not_finite
from sparse_opt._rounding import (
    GENERATOR_WORDS,
    Precision,
    check_generator_state,
    generator_state,
    set_generator_state,
)

#: The state-dict key of the generator of stochastic rounding.
GENERATOR_KEY = "rng_state"

ConfigValue = float | int | bool | str

#: The low-precision config fields and their defaults (a checkpoint without them has these).
PRECISION_DEFAULTS: dict[str, ConfigValue] = {"state_dtype": "float32", "rounding": "nearest", "seed": 0}


@dataclass(frozen=True)
class Entry:
    """One state-dict entry besides the config.

    Attributes
    ----------
    key : str
    shapes : tuple of shapes
        Accepted shapes; ``((),)`` for a counter. The first is the canonical one.
        ``None`` in a shape accepts any length on that axis.
    dtype : numpy dtype
        ``int64`` for counters and step records, ``uint64`` for a generator's state
        (:mod:`sparse_opt._rounding`), else the state's float dtype (bfloat16 state is
        saved as its uint16 bit pattern).
    nonnegative : bool
        Float entries only: refuse negative values (second moments, accumulators).
    bounded_by : str or None
        Int64 arrays only: the counter whose value bounds every entry from above.
    optional : bool
        May be missing on load (a key added after checkpoints without it were written).
    """

    key: str
    shapes: tuple[tuple[int | None, ...], ...]
    dtype: np.dtype
    nonnegative: bool = False
    bounded_by: str | None = None
    optional: bool = False

    def accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether ``shape`` is one of :attr:`shapes` (``None`` matching any length)."""
        return any(
            len(want) == len(shape) and all(w is None or w == n for w, n in zip(want, shape)) for want in self.shapes
        )

    @property
    def is_counter(self) -> bool:
        """An integer scalar (a step count)."""
        return self.shapes == ((),) and self.dtype == np.dtype(np.int64)


def counter(key: str) -> Entry:
    """An integer step counter in ``[0, 2**63 - 1]``."""
    return Entry(key, ((),), np.dtype(np.int64))


def float_array(key: str, like: np.ndarray, *, nonnegative: bool = False) -> Entry:
    """A float state array of ``like``'s shape and dtype."""
    return Entry(key, (like.shape,), like.dtype, nonnegative=nonnegative)


def config_scalars(config: Any) -> dict[str, ConfigValue]:
    """A config dataclass's fields as plain Python scalars, in field order (an enum as its string value)."""
    values = {f.name: getattr(config, f.name) for f in fields(config)}
    return {name: value.value if isinstance(value, Enum) else value for name, value in values.items()}


def make_state_dict(config: Mapping[str, ConfigValue], values: Mapping[str, Any]) -> dict[str, Any]:
    """Config plus copies of the state values: int counters as ``np.int64``, arrays copied.

    A bfloat16 array (``ml_dtypes``, which ``np.savez`` cannot write) is stored as its
    uint16 bit pattern; :func:`load_state` turns it back.
    """
    out: dict[str, Any] = dict(config)
    for key, value in values.items():
        out[key] = np.int64(value) if isinstance(value, int) else np.array(value, copy=True)
        if isinstance(value, np.ndarray) and value.dtype.name == "bfloat16":
            out[key] = out[key].view(np.uint16)
    return out


def check_keys(d: object, expected: Sequence[str], optional: Sequence[str] = ()) -> Mapping[str, Any]:
    """``d`` as a mapping with exactly the ``expected`` keys (``optional`` ones may be missing), or raise."""
    if not isinstance(d, Mapping) and not (hasattr(d, "keys") and hasattr(d, "__getitem__")):
        raise TypeError(f"state_dict must be a mapping, got {type(d).__name__}")
    have, want = set(d.keys()), set(expected)
    if have != want and not (want - set(optional) <= have <= want):
        missing, extra = sorted(want - have - set(optional)), sorted(have - want)
        raise ValueError(f"state_dict keys do not match: missing {missing}, unexpected {extra}")
    return d  # type: ignore[return-value]


def check_config(d: Mapping[str, Any], config: Mapping[str, ConfigValue]) -> None:
    """Raise ``ValueError`` unless every config entry in ``d`` equals this optimizer's.

    Values are compared as Python scalars after ``.item()``, so a config saved
    with ``np.savez`` compares equal to the live one; a bool only equals a bool.
    ``None`` cannot be saved without pickling, so optional floats are stored as
    NaN (NaN equals NaN here).
    """
    for key, want in config.items():
        a = np.asarray(d[key])
        if a.shape != ():
            raise ValueError(f"state_dict[{key!r}] must be a scalar, got shape {a.shape}")
        got = a.item()
        both_nan = isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want)
        same_kind = isinstance(got, bool) == isinstance(want, bool)
        if not both_nan and (got != want or not same_kind):
            raise ValueError(f"state_dict[{key!r}] = {got!r} does not match this optimizer's {key} = {want!r}")


def _load_counter(d: Mapping[str, Any], key: str) -> int:
    a = np.asarray(d[key])
    if a.shape != () or a.dtype.kind not in "iu":
        raise ValueError(f"state_dict[{key!r}] must be an integer scalar, got {d[key]!r}")
    v = int(a)
    if not 0 <= v <= INT64_MAX:
        raise ValueError(f"state_dict[{key!r}] = {v} is outside [0, 2**63 - 1]")
    return v


def _load_array(d: Mapping[str, Any], entry: Entry, counters: Mapping[str, int]) -> np.ndarray:
    key = entry.key
    a = np.asarray(d[key])
    if not entry.accepts(a.shape):
        accepted = " or ".join(str(s).replace("None", "any") for s in entry.shapes)
        raise ValueError(f"state_dict[{key!r}] has shape {a.shape}, expected {accepted}")
    is_bfloat16 = entry.dtype.name == "bfloat16"
    if is_bfloat16 and a.dtype == np.uint16:  # make_state_dict's bit pattern
        a = a.view(entry.dtype)
    if a.dtype != entry.dtype:
        raise ValueError(f"state_dict[{key!r}] has dtype {a.dtype}, expected {entry.dtype}")
    if a.dtype.kind == "f" or is_bfloat16:
        k = first_not_finite(a)
        if k is not None:
            raise ValueError(f"state_dict[{key!r}] holds {a.reshape(-1)[k]} at flat position {k}, which is not finite")
        if entry.nonnegative and a.size and a.min() < 0:
            k = int(np.flatnonzero(a.reshape(-1) < 0)[0])
            raise ValueError(f"state_dict[{key!r}] holds {a.reshape(-1)[k]} at flat position {k}; it must be >= 0")
    elif entry.bounded_by is not None and a.size:
        high = counters[entry.bounded_by]
        bad = (a < 0) | (a > high)
        if bad.any():
            k = int(np.flatnonzero(bad.reshape(-1))[0])
            raise ValueError(
                f"state_dict[{key!r}] holds {int(a.reshape(-1)[k])} at flat position {k}, "
                f"outside [0, {entry.bounded_by} = {high}]"
            )
    return np.array(a, order="C", copy=True)


def load_state(
    d: object, config: Mapping[str, ConfigValue], entries: Sequence[Entry]
) -> dict[str, Any]:
    """Validate ``d`` against ``config`` and ``entries``; return the entries' values (fresh copies).

    Counters come back as Python ints, arrays as C-contiguous copies. Raises
    ``ValueError`` (``TypeError`` if ``d`` is not a mapping) naming the first
    defect; nothing is returned, so nothing can be half-loaded.
    """
    mapping = check_keys(d, [*config, *(e.key for e in entries)], [e.key for e in entries if e.optional])
    check_config(mapping, config)
    counters = {e.key: _load_counter(mapping, e.key) for e in entries if e.is_counter}
    out: dict[str, Any] = dict(counters)
    for e in entries:
        if not e.is_counter and e.key in mapping:
            out[e.key] = _load_array(mapping, e, counters)
    return out


class Stateful:
    """Mixin: ``state_dict`` / ``load_state_dict`` from three small methods of the optimizer.

    Subclasses implement ``_config()`` (plain scalars), ``_state_entries()``
    (the :class:`Entry` list), ``_state_values()`` (key to current value) and
    ``_adopt_state(loaded)`` (swap in validated copies), and may add
    ``_check_state(loaded)``: checks across entries, run before anything is adopted.
    An optimizer whose :attr:`_precision` has a generator (stochastic rounding of
    half-precision parameters, :mod:`sparse_opt._rounding`) gets its state saved
    and restored under ``"rng_state"`` here.
    """

    #: The optimizer's :class:`~sparse_opt._rounding.Precision` (None: full precision only).
    _precision: Precision | None = None

    def _rng(self) -> np.random.Generator | None:
        return None if self._precision is None else self._precision.rng

    def _config(self) -> dict[str, ConfigValue]:
        raise NotImplementedError

    def _state_entries(self) -> list[Entry]:
        raise NotImplementedError

    def _state_values(self) -> dict[str, Any]:
        raise NotImplementedError

    def _adopt_state(self, loaded: dict[str, Any]) -> None:
        raise NotImplementedError

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """Raise ``ValueError`` for a defect no single entry shows (nothing adopted yet)."""

    def state_dict(self) -> dict[str, Any]:
        """Config, counters and copies of the state arrays, as plain numpy values.

        The result round-trips through ``np.savez`` and
        ``np.load(..., allow_pickle=False)``; parameters are not included (they
        are the caller's arrays).
        """
        values = self._state_values()
        rng = self._rng()
        if rng is not None:
            values = {**values, GENERATOR_KEY: generator_state(rng)}
        return make_state_dict(self._config(), values)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`: keys, config, shapes, dtypes and values are all checked.

        Raises ``ValueError`` on any mismatch (``TypeError`` for a non-mapping),
        leaving the optimizer unchanged. A state dict written before the
        low-precision fields existed (no ``state_dtype``, ``rounding``, ``seed``)
        loads into an optimizer whose fields have their defaults.
        """
        rng = self._rng()
        entries = self._state_entries()
        if rng is not None:
            entries = [*entries, Entry(GENERATOR_KEY, ((GENERATOR_WORDS,),), np.dtype(np.uint64))]
        config = self._config()
        if hasattr(state_dict, "keys") and hasattr(state_dict, "__getitem__"):
            absent = {k: v for k, v in PRECISION_DEFAULTS.items() if config.get(k) == v and k not in state_dict.keys()}
            if absent:
                state_dict = {**{k: state_dict[k] for k in state_dict.keys()}, **absent}
        loaded = load_state(state_dict, config, entries)
        words = None if rng is None else check_generator_state(loaded[GENERATOR_KEY], GENERATOR_KEY)
        self._check_state(loaded)
        self._adopt_state(loaded)
        if rng is not None:
            set_generator_state(rng, words)
