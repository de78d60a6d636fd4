"""The baselines of the encoder layer benchmark (pipelines/encoder.py): the same layer computed by NumPy
and PyTorch in the ways people run ragged batches. Each variant takes the packed tokens X (a RaggedArray
[B, L, 512]), the lengths and the weights, and returns one [n, 512] array per sequence.

- NumPy padded / PyTorch padded SDPA: the batch padded to its longest sequence, padded keys masked;
- NumPy per sequence / PyTorch per sequence: the whole layer once per sequence;
- PyTorch nested: a jagged nested tensor through the layer (linears, SDPA, layer norms);
- PyTorch packed: the linears and layer norms on the packed tokens, attention once per sequence;
- PyTorch sorted x8: sequences sorted by length, each chunk of 8 padded to its longest.

Useful FLOPs: the four products on the real tokens (2 x 512 x 6144 per token) plus attention's two
matmuls (4 n^2 512 per sequence of n tokens).
"""

from __future__ import annotations

import numpy as np

from pipelines.encoder import DIM, EPS, FFN, HEADS, HIDDEN, layer

LINEAR_FLOPS = 2 * HIDDEN * (3 * HIDDEN + HIDDEN + 2 * FFN)  # per token


def flops(lens, padded_to=None) -> float:
    """FLOPs of the layer over sequences of ``lens`` tokens, each padded to ``padded_to`` if given."""
    n = np.asarray(lens, np.float64) if padded_to is None else np.full(len(lens), float(padded_to))
    return float((n * LINEAR_FLOPS + 4 * n ** 2 * HIDDEN).sum())


def sorted_flops(lens, groups) -> float:
    return sum(flops([lens[b] for b in g], max(int(lens[b]) for b in g)) for g in groups if g)


# ------------------------------------------------------------------------------------------- NumPy
def numpy_per_sequence(x, lens, w):
    return [layer(s, w) for s in x.to_list()]


def numpy_padded(x, lens, w):
    n = int(lens.max(initial=0))
    xp = x.to_padded()  # [B, n, HIDDEN], zeros past each length
    nb = len(lens)
    qkv = (xp @ w["Wqkv"].reshape(HIDDEN, -1) + w["bqkv"].reshape(-1)).reshape(nb, n, 3, HEADS, DIM)
    q, k, v = (qkv[:, :, p].transpose(0, 2, 1, 3) for p in range(3))  # [B, H, n, D]
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(DIM))
    # the most negative float, not -inf: a sequence of length 0 masks a whole row, and -inf - -inf is NaN
    np.copyto(s, np.finfo(np.float32).min, where=np.arange(n)[None, None, None, :] >= lens[:, None, None, None])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    a = (s @ v).transpose(0, 2, 1, 3).reshape(nb, n, HIDDEN)
    y = _np_layernorm(a @ w["Wo"].reshape(HIDDEN, HIDDEN) + w["bo"] + xp, w["g1"], w["be1"])
    z = y @ w["W1"] + w["b1"]
    z = 0.5 * z * (1 + np.tanh(np.float32(np.sqrt(2 / np.pi)) * (z + np.float32(0.044715) * z ** 3)))
    out = _np_layernorm(z @ w["W2"] + w["b2"] + y, w["g2"], w["be2"])
    return [out[b, :m] for b, m in enumerate(lens)]


def _np_layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(EPS)) * gamma + beta


# ----------------------------------------------------------------------------------------- PyTorch
def _torch_weights(w):
    import torch

    t = {name: torch.from_numpy(v) for name, v in w.items()}
    t["Wqkv"] = t["Wqkv"].reshape(HIDDEN, -1)
    t["bqkv"] = t["bqkv"].reshape(-1)
    t["Wo"] = t["Wo"].reshape(HIDDEN, HIDDEN)
    return t


def _torch_layer(x, t, mask=None):
    """The layer on a [G, n, HIDDEN] tensor (or a jagged nested one), ``mask`` [G, 1, 1, n] the valid keys."""
    import torch.nn.functional as F

    qkv = x @ t["Wqkv"] + t["bqkv"]
    parts = (part.unflatten(-1, (HEADS, DIM)) for part in qkv.chunk(3, dim=-1))
    if x.is_nested:  # nested SDPA takes contiguous [B, j, H, D] parts only
        parts = (part.contiguous() for part in parts)
    q, k, v = (part.transpose(1, 2) for part in parts)  # [G, H, n, D]
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).flatten(-2)
    return _torch_tail(x, a, t)


def _torch_tail(x, a, t):
    """Output projection, residual, layer norm, FFN, residual, layer norm."""
    import torch.nn.functional as F

    y = F.layer_norm(a @ t["Wo"] + t["bo"] + x, (HIDDEN,), t["g1"], t["be1"], EPS)
    z = F.gelu(y @ t["W1"] + t["b1"], approximate="tanh")
    return F.layer_norm(z @ t["W2"] + t["b2"] + y, (HIDDEN,), t["g2"], t["be2"], EPS)


def _tokens(x):
    import torch

    return torch.from_numpy(x.values.reshape(-1, HIDDEN))  # [total tokens, HIDDEN], shared with x


def _offsets(x) -> np.ndarray:
    return np.asarray(x.offsets, dtype=np.int64) // HIDDEN


def torch_padded(x, lens, w, groups=None):
    """The layer on padded batches: the whole batch (``groups`` None) or chunks of sequences (sorted)."""
    from benchmarks.ragged import run_padded

    t, tokens = _torch_weights(w), _tokens(x)

    def layer_of(idx, mask):
        xp = tokens[idx] * mask[:, 0, 0, :, None]  # padded rows are zeros, as NumPy padded's
        return _torch_layer(xp, t, mask)
    return run_padded(lens, _offsets(x), groups, layer_of, np.zeros((0, HIDDEN), np.float32))


def torch_sorted(x, lens, w):
    from benchmarks.ragged import sorted_chunks

    return torch_padded(x, lens, w, sorted_chunks(lens))


def torch_per_sequence(x, lens, w):
    t, tokens, offs = _torch_weights(w), _tokens(x), _offsets(x)
    return [_torch_layer(tokens[offs[b]:offs[b] + m][None], t)[0].numpy() for b, m in enumerate(lens)]


def torch_packed(x, lens, w):
    """Linears and layer norms on all tokens at once; attention per sequence (its only ragged step)."""
    import torch
    import torch.nn.functional as F

    t, tokens, offs = _torch_weights(w), _tokens(x), _offsets(x)
    qkv = (tokens @ t["Wqkv"] + t["bqkv"]).unflatten(-1, (3, HEADS, DIM))
    parts = []
    for b, m in enumerate(lens):
        q, k, v = (qkv[offs[b]:offs[b] + m, p].transpose(0, 1) for p in range(3))  # [H, m, D]
        parts.append(F.scaled_dot_product_attention(q, k, v).transpose(0, 1).flatten(-2))
    a = torch.cat(parts) if parts else torch.zeros((0, HIDDEN))
    out = _torch_tail(tokens, a, t)
    return [out[offs[b]:offs[b] + m].numpy() for b, m in enumerate(lens)]


def torch_nested(x, lens, w):
    import torch

    t = _torch_weights(w)
    nt = torch.nested.nested_tensor_from_jagged(_tokens(x), torch.from_numpy(_offsets(x)))  # [B, j, HIDDEN]
    return [o.numpy() for o in _torch_layer(nt, t).unbind()]


def variants(lens) -> dict:
    """name -> (call(x, lens, w), FLOPs it spends)."""
    from benchmarks.ragged import sorted_chunks

    useful = flops(lens)
    padded = flops(lens, int(lens.max(initial=0)))
    return {
        "NumPy padded": (numpy_padded, padded),
        "NumPy per sequence": (numpy_per_sequence, useful),
        "PyTorch padded SDPA": (torch_padded, padded),
        "PyTorch nested": (torch_nested, useful),
        "PyTorch per sequence": (torch_per_sequence, useful),
        "PyTorch packed": (torch_packed, useful),
        "PyTorch sorted x8": (torch_sorted, sorted_flops(lens, sorted_chunks(lens))),
    }
