"""``RaggedArray``: the runtime value of a ragged tensor, CoRa's storage.

A ragged tensor ``[B, ...]`` has one entry per batch index b; some dimensions of an entry have the
entry's own length, the others a fixed size. The ragged dimensions share one length ``lengths[b]``
(``(H, L_b, L_b)`` for attention scores), or each has its own, ``lengths[b, r]`` for the r-th ragged
dimension (``(H_b, W_b, 3)`` for a batch of images of different sizes). All entries are packed one
after the other, each in row-major order, into one flat buffer ``values``; ``offsets[b]`` is where entry
b starts (``offsets[B]`` is the total), so any element is found in O(1) with no per-element index. A
storage padding multiple (``pad``) rounds each ragged dimension of the storage up (a schedule choice:
aligned rows for vector code); the padded elements are never part of the value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RAGGED = None  # marks a ragged dimension in an entry template


def _lengths_array(lengths, what: str = "lengths", ragged: int | None = None) -> np.ndarray:
    """``lengths`` as int64: one per entry (shared by the ragged dimensions), or, where ``ragged`` (the
    number of ragged dimensions) is given, ``[B, ragged]``, one per entry and ragged dimension."""
    arr = np.asarray(lengths)
    if ragged is not None and arr.ndim == 2:
        if arr.shape[1] != ragged:
            raise ValueError(f"{what} has {arr.shape[1]} column(s), one per ragged dimension, but there are "
                             f"{ragged} ragged dimension(s)")
    elif arr.ndim != 1:
        per_axis = f" or [B, {ragged}] (one per ragged dimension)" if ragged is not None else ""
        raise ValueError(f"{what} must be one-dimensional (one length per batch entry){per_axis}, got shape "
                         f"{arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise TypeError(f"{what} must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if (arr < 0).any():
        at = tuple(int(v) for v in np.argwhere(arr < 0)[0])
        where = ", ".join(map(str, at))
        raise ValueError(f"{what}[{where}] is {int(arr[at])}: lengths must not be negative")
    return arr


def per_axis(template: tuple, lengths: np.ndarray) -> np.ndarray:
    """``[B, R]``: each entry's length along each of the R ragged dimensions of ``template``."""
    ragged = sum(d is RAGGED for d in template)
    lengths = np.asarray(lengths)
    return lengths if lengths.ndim == 2 else np.repeat(lengths[:, None], ragged, axis=1)


def _mask_lengths(mask, batch: int) -> np.ndarray:
    """The lengths a prefix mask ``[B, L]`` (True where valid) says; a ValueError where a row's valid
    positions do not come first (a ragged entry is its first ``length`` positions)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True where valid), got dtype {m.dtype}")
    if m.ndim != 2 or m.shape[0] != batch:
        raise ValueError(f"mask must be [B, L] with B = {batch} (the array's batch), got shape {m.shape}")
    lengths = m.sum(axis=1).astype(np.int64)
    prefix = np.arange(m.shape[1])[None, :] < lengths[:, None]
    if not np.array_equal(m, prefix):
        b = int(np.flatnonzero((m != prefix).any(axis=1))[0])
        raise ValueError(f"mask row {b} has a valid position after a padded one: a ragged entry is its first "
                         "positions (sort or pack the row first)")
    return lengths


def entry_shape(template: tuple, length, pad: int = 1) -> tuple[int, ...]:
    """The storage shape of one entry: each ragged dimension its length (``length``: one for all, or
    one per ragged dimension) rounded up to ``pad``."""
    ragged = iter(np.broadcast_to(np.asarray(length, dtype=np.int64), (sum(d is RAGGED for d in template),)))
    return tuple(int(-(-next(ragged) // pad) * pad) if d is RAGGED else d for d in template)


def offsets_of(template: tuple, lengths: np.ndarray, pad: int = 1) -> np.ndarray:
    """Start of each entry in the packed buffer, and the total at the end (B + 1 values)."""
    stored = -(-per_axis(template, lengths) // pad) * pad
    sizes = np.ones(len(lengths), dtype=np.int64)
    r = 0
    for d in template:
        if d is RAGGED:
            sizes = sizes * stored[:, r]
            r += 1
        else:
            sizes = sizes * d
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


class RaggedArray:
    """A batch of arrays whose ragged dimensions have lengths of their own in each entry, packed into one
    buffer.

    ``template`` is an entry's shape with ``None`` at each ragged dimension: ``(None, 8, 64)`` for
    queries ``[B, L, 8, 64]``, ``(8, None, None)`` for scores ``[B, 8, L, L]``. ``lengths`` is one length
    per entry, shared by its ragged dimensions, or ``[B, R]``, one per entry and ragged dimension (images
    of different heights and widths: ``(None, None, 3)``).
    """

    def __init__(self, values, lengths, template: Sequence, pad: int = 1, offsets=None):
        template = tuple(template)
        for k, d in enumerate(template):
            if d is not RAGGED and (not isinstance(d, (int, np.integer)) or d < 0):
                raise ValueError(f"template[{k}] must be a non-negative int or None (ragged), got {d!r}")
        if RAGGED not in template:
            raise ValueError(f"template {template} has no ragged dimension (None)")
        if not isinstance(pad, (int, np.integer)) or pad < 1:
            raise ValueError(f"pad must be a positive int, got {pad!r}")
        self._template = tuple(d if d is RAGGED else int(d) for d in template)
        self._pad = int(pad)
        self._lengths = _lengths_array(lengths, ragged=sum(d is RAGGED for d in self._template))
        expected = offsets_of(self._template, self._lengths, self._pad)
        if offsets is not None:
            given = np.asarray(offsets)
            if given.shape != expected.shape or not np.array_equal(given, expected):
                raise ValueError(f"offsets disagree with lengths {self._lengths.tolist()} and entry shape "
                                 f"{self._shape_text()}: expected {expected.tolist()}, got {given.tolist()}")
        # read-only: offsets that disagree with the lengths or the values would send generated code
        # outside the buffer (it trusts them); the values stay writable (a kernel writes its outputs there)
        self._lengths.flags.writeable = False
        expected.flags.writeable = False
        self._offsets = expected
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"values must be the flat packed buffer (1-D), got shape {values.shape}")
        if values.size != expected[-1]:
            raise ValueError(f"values has {values.size} elements but lengths {self._lengths.tolist()} with entry "
                             f"shape {self._shape_text()} need {int(expected[-1])}")
        self._values = values

    # -- the parts, read-only (a RaggedArray is rebuilt, not edited, when its lengths change)
    @property
    def values(self) -> np.ndarray:
        """The packed buffer: every entry, one after the other, each in row-major order."""
        return self._values

    @property
    def lengths(self) -> np.ndarray:
        """One length per entry (``[B]``), shared by the ragged dimensions; or ``[B, R]``, entry b's
        length along each of its R ragged dimensions, where they have lengths of their own."""
        return self._lengths

    def axis_lengths(self, axis: int) -> np.ndarray:
        """Each entry's length along ``axis`` (counted in the full shape ``[B, ...]``, so >= 1), a ragged
        dimension."""
        if not 1 <= axis < self.ndim or self._template[axis - 1] is not RAGGED:
            raise ValueError(f"axis {axis} is not a ragged dimension of {self!r}")
        return per_axis(self._template, self._lengths)[:, sum(d is RAGGED for d in self._template[:axis - 1])]

    @property
    def offsets(self) -> np.ndarray:
        """Where each entry starts in ``values``, and the total at the end (B + 1 values)."""
        return self._offsets

    @property
    def template(self) -> tuple:
        return self._template

    @property
    def pad(self) -> int:
        return self._pad

    def check(self, what: str = "the RaggedArray") -> None:
        """Raise a ValueError naming ``what`` unless lengths, offsets and values agree: the first offset 0,
        each step an entry's size (its lengths times its row size), the last the length of ``values``.
        Kernels call it before generated code reads the buffer, whatever was done to the arrays since."""
        lengths, offsets, values = self._lengths, self._offsets, self._values
        ragged = sum(d is RAGGED for d in self._template)
        if lengths.ndim not in (1, 2) or lengths.ndim == 2 and lengths.shape[1] != ragged or (lengths < 0).any():
            raise ValueError(f"{what}: lengths must be one non-negative length per entry, or one per entry and "
                             "ragged dimension")
        if offsets.shape != (len(lengths) + 1,):
            raise ValueError(f"{what}: offsets must have {len(lengths) + 1} values (one per entry and the total), "
                             f"got shape {offsets.shape}")
        expected = offsets_of(self._template, lengths, self._pad)
        if not np.array_equal(offsets, expected):
            b = int(np.flatnonzero(offsets != expected)[0])
            why = "the first must be 0" if b == 0 else \
                "they must step by each entry's size (its length times its row size)"
            raise ValueError(f"{what}: offsets[{b}] is {int(offsets[b])}, expected {int(expected[b])} from its lengths "
                             f"{lengths.tolist() if len(lengths) <= 8 else '...'} and entry shape "
                             f"{self._shape_text()}; {why}")
        if values.ndim != 1 or values.size != expected[-1]:
            raise ValueError(f"{what}: values must be a 1-D buffer of {int(expected[-1])} elements (the last "
                             f"offset), got shape {values.shape}")

    # -- constructors
    @classmethod
    def from_list(cls, arrays: Sequence, ragged_axes: Sequence[int] | None = None, pad: int = 1,
                  dtype=None) -> RaggedArray:
        """Pack a list of arrays, one per batch entry. The ragged axes are those whose size differs
        between entries; give ``ragged_axes`` when that is ambiguous (all entries of the same shape: axis 0
        is then taken). Where an entry's ragged axes all have one length, the lengths are shared (one per
        entry); otherwise each ragged axis keeps its own (``lengths`` is ``[B, R]``: images of different
        heights and widths)."""
        arrs = [np.asarray(a, dtype=dtype) for a in arrays]
        if not arrs:
            if ragged_axes is None:
                raise ValueError("from_list([]) cannot infer the entry shape; use RaggedArray(values, lengths, "
                                 "template) for an empty batch")
            raise ValueError("from_list([]) has no entries to take the fixed dimensions from")
        ndim = arrs[0].ndim
        for b, a in enumerate(arrs):
            if a.ndim != ndim:
                raise ValueError(f"arrays[{b}] has {a.ndim} dimension(s), arrays[0] has {ndim}")
        if ndim == 0:
            raise ValueError("from_list needs arrays of at least one dimension")
        if ragged_axes is None:
            ragged_axes = [k for k in range(ndim) if len({a.shape[k] for a in arrs}) > 1] or [0]
        axes = sorted({int(k) % ndim for k in ragged_axes})
        lengths = np.array([[a.shape[k] for k in axes] for a in arrs], dtype=np.int64)
        if (lengths == lengths[:, :1]).all():
            lengths = lengths[:, 0]
        template = []
        for k in range(ndim):
            if k in axes:
                template.append(RAGGED)
            else:
                for b, a in enumerate(arrs):
                    if a.shape[k] != arrs[0].shape[k]:
                        raise ValueError(f"arrays[{b}] has {a.shape[k]} in dimension {k}, arrays[0] has "
                                         f"{arrs[0].shape[k]}: only the ragged dimensions may differ")
                template.append(arrs[0].shape[k])
        dt = np.result_type(*arrs) if dtype is None else np.dtype(dtype)
        out = cls._empty(dt, lengths, tuple(template), pad)
        for b, a in enumerate(arrs):
            out._entry_storage(b)[out._valid(b)] = a
        return out

    @classmethod
    def from_padded(cls, array, lengths=None, axis=1, pad: int = 1, *, mask=None) -> RaggedArray:
        """Take the valid part of a padded ``[B, ...]`` array: along ``axis`` (an int or a tuple of axes,
        counted in the full shape, so >= 1) entry b keeps its first ``lengths[b]`` elements, or, with
        ``lengths`` of shape ``[B, len(axis)]``, its first ``lengths[b, r]`` along the r-th axis (in
        increasing order). Zero-copy when nothing is cut off (every length equals the padded size, one
        ragged axis, the array contiguous). Instead of ``lengths``, a ``mask`` ``[B, L]`` of the valid
        positions along ``axis`` (an attention mask: True where valid), each row's valid positions first."""
        if isinstance(array, np.ma.MaskedArray):
            raise TypeError("from_padded takes the padded data and its valid positions apart: "
                            "from_padded(a.data, mask=~a.mask)")
        arr = np.asarray(array)
        if arr.ndim < 2:
            raise ValueError(f"from_padded needs a [B, ...] array with at least 2 dimensions, got shape {arr.shape}")
        if (lengths is None) == (mask is None):
            raise ValueError("from_padded needs lengths or mask (one of them)")
        axes = sorted({int(a) % arr.ndim for a in ((axis,) if np.isscalar(axis) else axis)})
        if 0 in axes:
            raise ValueError("from_padded: axis 0 is the batch dimension; the ragged axes are >= 1")
        lengths = _lengths_array(lengths, ragged=len(axes)) if mask is None else _mask_lengths(mask, arr.shape[0])
        if len(lengths) != arr.shape[0]:
            raise ValueError(f"lengths has {len(lengths)} entries but the array's batch dimension has {arr.shape[0]}")
        template = tuple(RAGGED if k + 1 in axes else arr.shape[k + 1] for k in range(arr.ndim - 1))
        for r, a in enumerate(axes):
            along = per_axis(template, lengths)[:, r]
            if len(along) and along.max() > arr.shape[a]:
                b = int(along.argmax())
                at = f"{b}, {r}" if lengths.ndim == 2 else f"{b}"
                raise ValueError(f"lengths[{at}] is {int(along[b])} but the array has only {arr.shape[a]} in "
                                 f"axis {a}")
        full = len(axes) == 1 and pad == 1 and bool(np.all(lengths == arr.shape[axes[0]]))
        if full and axes == [1] and arr.flags.c_contiguous:
            return cls(arr.reshape(-1), lengths.reshape(-1), template, pad)
        out = cls._empty(arr.dtype, lengths, template, pad)
        for b in range(len(lengths)):
            out._entry_storage(b)[out._valid(b)] = arr[b][out._valid(b)]
        return out

    @classmethod
    def from_nested(cls, tensor, what: str = "the nested tensor") -> RaggedArray:
        """A ``torch.nested`` tensor of the jagged layout (``[B, j, ...]``: the ragged dimension second),
        sharing its values' memory: the values ``[sum of lengths, ...]`` are the packed buffer and its
        offsets the entries' starts. Other nested tensors (the strided layout) are copied entry by entry."""
        import torch

        if not getattr(tensor, "is_nested", False):
            raise TypeError(f"{what} must be a torch.nested tensor, got {type(tensor).__name__}")
        if tensor.device.type != "cpu":
            raise TypeError(f"{what} is on {tensor.device}; RaggedArray holds CPU memory ({what}.cpu())")
        tensor = tensor.detach()
        if tensor.layout != torch.jagged:
            return cls.from_list([t.numpy() for t in tensor.unbind()], ragged_axes=[0])
        if tensor._ragged_idx != 1:
            raise ValueError(f"{what}: its ragged dimension is {tensor._ragged_idx}; RaggedArray.from_nested takes "
                             "jagged tensors ragged in dimension 1 ([B, j, ...])")
        values = tensor.values()
        if not values.is_contiguous():
            values = values.contiguous()
        offsets = tensor.offsets().numpy()
        return cls(values.numpy().reshape(-1), np.diff(offsets), (RAGGED, *values.shape[1:]))

    def to_nested(self):
        """A ``torch.nested`` jagged tensor ``[B, j, ...]`` sharing this array's values (one ragged dimension,
        the first of an entry, and no storage padding; other RaggedArrays are copied entry by entry)."""
        import torch

        tail = self._template[1:]
        if self._template[0] is RAGGED and RAGGED not in tail and self._pad == 1:
            rows = int(self._lengths.sum())
            values = torch.from_numpy(self._values.reshape(rows, *tail))
            starts = np.concatenate([[0], np.cumsum(self._lengths)]).astype(np.int64)
            return torch.nested.nested_tensor_from_jagged(values, torch.from_numpy(starts))
        return torch.nested.nested_tensor([torch.from_numpy(np.ascontiguousarray(a)) for a in self.to_list()])

    @classmethod
    def _empty(cls, dtype, lengths, template, pad) -> RaggedArray:
        offs = offsets_of(template, lengths, pad)
        return cls(np.zeros(int(offs[-1]), dtype=dtype), lengths, template, pad)

    # -- views
    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def batch(self) -> int:
        return len(self.lengths)

    def __len__(self) -> int:
        return self.batch

    @property
    def ndim(self) -> int:
        return 1 + len(self.template)

    def entry_shape(self, b: int) -> tuple[int, ...]:
        return entry_shape(self.template, self.lengths[b])

    def _entry_storage(self, b: int) -> np.ndarray:
        return self.values[self.offsets[b]:self.offsets[b + 1]].reshape(
            entry_shape(self.template, self.lengths[b], self.pad))

    def _valid(self, b: int) -> tuple[slice, ...]:
        return tuple(slice(0, n) if d is RAGGED else slice(None)
                     for d, n in zip(self.template, entry_shape(self.template, self.lengths[b]), strict=True))

    def __getitem__(self, b: int) -> np.ndarray:
        """Entry ``b`` with its own shape (a view into ``values``)."""
        if not isinstance(b, (int, np.integer)):
            raise TypeError(f"index a RaggedArray with a batch index, got {b!r}")
        if not -self.batch <= b < self.batch:
            raise IndexError(f"batch index {b} out of range for {self.batch} entries")
        b = int(b) % self.batch
        return self._entry_storage(b)[self._valid(b)]

    def to_list(self) -> list[np.ndarray]:
        """One array per batch entry, each with its own shape; views into ``values``, not copies."""
        return [self[b] for b in range(self.batch)]

    def with_pad(self, pad: int) -> RaggedArray:
        """The same values stored with rows padded to ``pad``: ``self`` when it already is, else a copy."""
        if pad == self.pad:
            return self
        out = RaggedArray._empty(self.dtype, self.lengths, self.template, pad)
        for b in range(self.batch):
            out._entry_storage(b)[self._valid(b)] = self[b]
        return out

    def _longest(self) -> np.ndarray:
        """The longest length along each ragged dimension (0 for an empty batch)."""
        lengths = per_axis(self.template, self.lengths)
        return lengths.max(axis=0) if self.batch else np.zeros(lengths.shape[1], dtype=np.int64)

    def padded_shape(self) -> tuple[int, ...]:
        return (self.batch, *entry_shape(self.template, self._longest()))

    def storage_shape(self) -> tuple[int, ...]:
        """``padded_shape`` with the ragged dimensions rounded up to ``pad``: the box the storage of the
        longest entry spans."""
        return (self.batch, *entry_shape(self.template, self._longest(), self.pad))

    def to_padded(self, fill=0) -> np.ndarray:
        """A ``[B, ...]`` array with every ragged dimension at the longest length, ``fill`` elsewhere."""
        out = np.full(self.padded_shape(), fill, dtype=self.dtype)
        for b in range(self.batch):
            out[b][self._valid(b)] = self[b]
        return out

    def _shape_text(self) -> str:
        shared = self._lengths.ndim == 1
        names = iter(["L"] * len(self.template) if shared else [f"L{r}" for r in range(len(self.template))])
        return "(" + ", ".join(next(names) if d is RAGGED else str(d) for d in self.template) + ")"

    def __repr__(self) -> str:
        pad = f", pad={self.pad}" if self.pad != 1 else ""
        return (f"RaggedArray(batch={self.batch}, entry={self._shape_text()}, dtype={self.dtype}, "
                f"lengths={self.lengths.tolist() if self.batch <= 8 else '...'}{pad})")
