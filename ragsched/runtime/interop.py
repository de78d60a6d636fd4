"""Arrays from the rest of the ecosystem: what a kernel call takes besides NumPy arrays, and how results
go back in the caller's kind.

In: a PyTorch CPU tensor (a view of its memory through ``Tensor.numpy()``), any object with
``__array_interface__`` (``np.asarray``) or ``__dlpack__`` (``np.from_dlpack``), all zero-copy; a
``torch.nested`` jagged tensor where an argument is ragged (``RaggedArray.from_nested``, zero-copy).
Refused with a TypeError naming the argument: masked arrays (a kernel reads every element, so a mask
would be dropped without a word), tensors on a GPU for a CPU kernel, tensors that need a gradient.
Out: when an argument was a torch tensor, results are torch tensors sharing the results' memory
(``torch.from_numpy``), ragged ones jagged nested tensors; ``out=`` takes torch tensors and is written
in place."""

from __future__ import annotations

import numpy as np

TORCH = "torch"


def is_torch(value) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch where the caller has not)."""
    return type(value).__module__.startswith("torch") and hasattr(value, "is_nested")


def host_array(name: str, value, role: str = "argument"):
    """(a NumPy array viewing ``value``'s memory, the caller's kind: ``TORCH`` or None), or (``value``, None)
    for what is left to the kernel's own checks (lists, scalars, wrong types)."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{role} {name} is a masked array: a kernel reads every element, so its mask would be "
                        f"lost; pass {name}.filled(fill_value) or, for ragged data, rs.RaggedArray.from_padded("
                        f"{name}.data, mask=~{name}.mask)")
    if isinstance(value, np.ndarray):
        return value, None
    if is_torch(value):
        if value.is_nested:
            return value, TORCH  # a ragged argument: RaggedArray.from_nested
        if value.device.type != "cpu":
            raise TypeError(f"{role} {name} is a torch tensor on {value.device}; a CPU kernel takes CPU tensors "
                            f"({name}.cpu()), a cuda kernel CuPy arrays")
        if value.requires_grad:
            raise TypeError(f"{role} {name} requires grad: ragsched does not differentiate; pass {name}.detach()")
        return value.resolve_conj().resolve_neg().numpy(), TORCH
    if hasattr(value, "__array_interface__"):
        return np.asarray(value), None
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value), None
        except (BufferError, TypeError, RuntimeError) as err:
            raise TypeError(f"{role} {name}: its __dlpack__ gives no CPU array NumPy can view ({err})") from None
    return value, None


def to_kind(value, kind):
    """A result (NumPy array or RaggedArray) in the caller's kind, sharing its memory."""
    if kind != TORCH:
        return value
    import torch

    from ..ragged.array import RaggedArray

    if isinstance(value, RaggedArray):
        return value.to_nested()
    return torch.from_numpy(value)


def to_device(inputs: dict) -> dict:
    """``inputs`` as a kernel compiled for a GPU takes them: a dense call's arrays as CuPy arrays; a ragged
    call's as they are (RaggedArrays hold NumPy arrays, and the call copies them to the device and back)."""
    import cupy

    from ..ragged.array import RaggedArray

    if any(isinstance(v, RaggedArray) for v in inputs.values()):
        return inputs
    return {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def to_host(result):
    """A GPU kernel's result (a CuPy array, a RaggedArray, or a tuple of them) with its arrays in NumPy."""
    if isinstance(result, tuple):
        return tuple(to_host(r) for r in result)
    return result.get() if hasattr(result, "__cuda_array_interface__") else result
