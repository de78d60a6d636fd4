"""Arrays of other libraries in a kernel call: torch tensors in give torch tensors out, sharing memory
(dense and ragged kernels, torch.nested jagged tensors for ragged data), ``out=`` of them is written in
place, objects with only ``__array_interface__`` or ``__dlpack__`` are read without a copy, and masked
arrays are refused rather than read without their mask."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.ragged.array import RaggedArray
from tests.ragged.test_array import _per_row_double


def _add():
    N = rs.Size("N")
    a, b = rs.Input("a", rs.float32, [N]), rs.Input("b", rs.float32, [N])
    x = rs.Var("x")
    f = rs.Func("f", shape=[N])
    f[x] = a[x] + 2.0 * b[x]
    return rs.Pipeline([f]).compile()


class OnlyDLPack:
    """An array of some other library that offers nothing but DLPack."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class OnlyInterface:
    def __init__(self, a):
        self.__array_interface__ = a.__array_interface__
        self._keep = a


def test_torch_in_torch_out_sharing_memory():
    torch = pytest.importorskip("torch")
    k = _add()
    a, b = torch.arange(6, dtype=torch.float32), torch.ones(6)
    got = k(a=a, b=b)
    assert isinstance(got, torch.Tensor) and torch.equal(got, a + 2.0)
    out = torch.empty(6)
    assert k(a=a, b=b, out=out) is out and torch.equal(out, a + 2.0)
    # the result shares the kernel's output memory: NumPy out= viewed as a tensor is that tensor's memory
    o = np.empty(6, np.float32)
    res = k(a=a, b=b, out=torch.from_numpy(o))
    assert res.data_ptr() == o.ctypes.data and np.array_equal(o, (a + 2.0).numpy())
    # a NumPy call still returns NumPy
    assert type(k(a=a.numpy(), b=b.numpy())) is np.ndarray


def test_dlpack_and_array_interface_objects_are_read_in_place():
    k = _add()
    a, b = np.arange(5, dtype=np.float32), np.full(5, 3.0, np.float32)
    for wrap in (OnlyDLPack, OnlyInterface):
        got = k(a=wrap(a), b=wrap(b))
        assert type(got) is np.ndarray and np.array_equal(got, a + 6.0)
    out = np.zeros(5, np.float32)
    k(a=a, b=b, out=OnlyInterface(out))
    assert np.array_equal(out, a + 6.0)


def test_refused_with_the_argument_named():
    k = _add()
    a = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="argument a is a masked array"):
        k(a=np.ma.masked_array(a, mask=[0, 1, 0]), b=a)
    with pytest.raises(TypeError, match="dtype"):
        k(a=np.ones(3), b=a)


def test_torch_tensors_refused_with_the_argument_named():
    torch = pytest.importorskip("torch")
    k = _add()
    a = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="argument b requires grad"):
        k(a=a, b=torch.ones(3, requires_grad=True))
    with pytest.raises(TypeError, match="dtype"):
        k(a=torch.ones(3, dtype=torch.float64), b=a)


def test_a_ragged_kernel_takes_and_gives_nested_tensors():
    torch = pytest.importorskip("torch")
    k = rs.Pipeline([_per_row_double()]).compile()
    rows = [torch.randn(m, 4) for m in (3, 1, 5)]
    nested = torch.nested.nested_tensor(rows, layout=torch.jagged)
    lens = torch.tensor([3, 1, 5], dtype=torch.int32)
    got = k(lens=lens, X=nested)
    assert got.is_nested and got.layout == torch.jagged
    for r, g in zip(rows, got.unbind()):
        assert torch.allclose(g, 2 * r)
    # zero-copy both ways: the RaggedArray views the nested tensor's values, and back
    ra = RaggedArray.from_nested(nested)
    assert ra.values.ctypes.data == nested.values().data_ptr() and ra.lengths.tolist() == [3, 1, 5]
    back = ra.to_nested()
    assert back.values().data_ptr() == ra.values.ctypes.data
    # NumPy in, RaggedArray out, as before
    assert isinstance(k(lens=lens.numpy(), X=ra), RaggedArray)


def test_from_padded_with_a_mask():
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], bool)
    ra = RaggedArray.from_padded(x, mask=mask)
    assert ra.lengths.tolist() == [3, 1] and np.array_equal(ra[0], x[0, :3]) and np.array_equal(ra[1], x[1, :1])
    with pytest.raises(ValueError, match="mask row 1"):
        RaggedArray.from_padded(x, mask=np.array([[1, 1, 1, 0], [0, 1, 0, 0]], bool))
    with pytest.raises(TypeError, match="from_padded"):
        RaggedArray.from_padded(np.ma.masked_array(x, mask=np.zeros_like(x, bool)), [3, 1])
    with pytest.raises(ValueError, match="lengths or mask"):
        RaggedArray.from_padded(x)
