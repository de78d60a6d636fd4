"""A transformer encoder layer (BERT-base's block at CoRa's size: hidden 512, 8 heads of 64, FFN 2048) over a
batch of sequences of different lengths, on packed tokens: no padded token is computed.

    qkv = X Wqkv + bqkv                   (one projection for queries, keys and values)
    a   = attention(q, k, v)              (per sequence and head, softmax over the sequence's tokens)
    y   = layernorm(a Wo + bo + X)
    out = layernorm(gelu(y W1 + b1) W2 + b2 + y)

GELU is the tanh form (PyTorch's ``gelu(approximate="tanh")``), written x / (1 + exp(-2u)) with
u = sqrt(2 / pi) (x + 0.044715 x^3). X and out are RaggedArrays [B, L, 512]. The "full" inputs are the
first 128 sequences of MNLI, "long" the first 32 of RACE; "small" are 5 short ones.
"""

from pathlib import Path

import numpy as np

import ragsched as rs

try:
    from pipelines.attention import attention_core, example_lengths, schedule_attention, schedule_attention_gpu
    from pipelines.linear import schedule_product, tile_sum
except ImportError:  # loaded by path (sched run pipelines/encoder.py) from outside the repository root
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pipelines.attention import attention_core, example_lengths, schedule_attention, schedule_attention_gpu
    from pipelines.linear import schedule_product, tile_sum

HIDDEN, HEADS, DIM, FFN = 512, 8, 64, 2048
EPS = 1e-5
SCALES = ("small", "full", "long")  # example_inputs' (the attention pipeline's lengths)
GELU_C = float(np.sqrt(2 / np.pi))
WEIGHTS = {  # name: shape (fixed sizes: the layer's dimensions)
    "Wqkv": (HIDDEN, 3, HEADS, DIM), "bqkv": (3, HEADS, DIM), "Wo": (HEADS, DIM, HIDDEN), "bo": (HIDDEN,),
    "g1": (HIDDEN,), "be1": (HIDDEN,), "W1": (HIDDEN, FFN), "b1": (FFN,), "W2": (FFN, HIDDEN), "b2": (HIDDEN,),
    "g2": (HIDDEN,), "be2": (HIDDEN,),
}


def build():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, HIDDEN])
    w = {name: rs.Input(name, rs.float32, list(shape)) for name, shape in WEIGHTS.items()}
    b, i, t, h, d, n, f = rs.vars("b i t h d n f")
    c = rs.RDom(0, HIDDEN, name="c")

    # every product below is a sum Func (no shape: computed per tile by a schedule) copied to a ragged Func
    qkv_sum = rs.Func("qkv_sum", dtype=rs.float32)
    qkv_sum[b, i, t, h, d] = w["bqkv"][t, h, d]
    qkv_sum[b, i, t, h, d] += X[b, i, c] * w["Wqkv"][c, t, h, d]
    qkv = rs.Func("qkv", shape=[B, L, 3, HEADS, DIM])
    qkv[b, i, t, h, d] = qkv_sum[b, i, t, h, d]
    Q, K, V = (rs.Func(name) for name in "QKV")
    for k, part in enumerate((Q, K, V)):
        part[b, i, h, d] = qkv[b, i, k, h, d]
    a = attention_core(Q, K, V, lens, (B, L, HEADS, DIM), "a")

    r = rs.RDom((0, HEADS), (0, DIM), name="r")
    proj_sum = rs.Func("proj_sum", dtype=rs.float32)
    proj_sum[b, i, n] = w["bo"][n] + X[b, i, n]
    proj_sum[b, i, n] += a[b, i, r.x, r.y] * w["Wo"][r.x, r.y, n]
    proj = rs.Func("proj", shape=[B, L, HIDDEN])
    proj[b, i, n] = proj_sum[b, i, n]
    y = layernorm(proj, w["g1"], w["be1"], (B, L), "y")

    up_sum = rs.Func("up_sum", dtype=rs.float32)
    up_sum[b, i, f] = w["b1"][f]
    up_sum[b, i, f] += y[b, i, c] * w["W1"][c, f]
    up = rs.Func("up", shape=[B, L, FFN])
    x = up_sum[b, i, f]
    u = (x + 0.044715 * x * x * x) * GELU_C
    up[b, i, f] = x / (1.0 + rs.exp(-2.0 * u))

    fr = rs.RDom(0, FFN, name="fr")
    down_sum = rs.Func("down_sum", dtype=rs.float32)
    down_sum[b, i, n] = w["b2"][n] + y[b, i, n]
    down_sum[b, i, n] += up[b, i, fr] * w["W2"][fr, n]
    down = rs.Func("down", shape=[B, L, HIDDEN])
    down[b, i, n] = down_sum[b, i, n]
    return layernorm(down, w["g2"], w["be2"], (B, L), "out")


def layernorm(x, gamma, beta, batch, name):
    """``name`` [B, L, HIDDEN]: each token of ``x`` normalized over its HIDDEN values, then scaled and
    shifted. The mean and the variance are Funcs ``name.mean``/``name.var`` per token (two passes)."""
    B, L = batch
    b, i, n = rs.vars("b i n")
    c = rs.RDom(0, HIDDEN, name="c")
    mean = rs.Func(f"{name}_mean", shape=[B, L], dtype=rs.float32)
    mean[b, i] = 0.0
    mean[b, i] += x[b, i, c] * (1 / HIDDEN)
    var = rs.Func(f"{name}_var", shape=[B, L], dtype=rs.float32)
    var[b, i] = 0.0
    dev = x[b, i, c] - mean[b, i]
    var[b, i] += dev * dev * (1 / HIDDEN)
    out = rs.Func(name, shape=[B, L, HIDDEN])
    out[b, i, n] = (x[b, i, n] - mean[b, i]) * rs.rsqrt(var[b, i] + EPS) * gamma[n] + beta[n]
    return out


def example_inputs(scale="small"):
    lens = example_lengths(scale)
    rng = np.random.default_rng(0)
    inputs = {"X": rs.RaggedArray.from_list([rng.standard_normal((m, HIDDEN)).astype(np.float32) for m in lens],
                                            ragged_axes=[0]), "lens": lens}
    for name, shape in WEIGHTS.items():
        fan_in = {"Wqkv": HIDDEN, "Wo": HIDDEN, "W1": HIDDEN, "W2": FFN}.get(name)
        if fan_in:  # weights as a trained layer's: outputs of unit scale
            value = rng.standard_normal(shape) / np.sqrt(fan_in)
        elif name.startswith("g"):
            value = 1 + 0.1 * rng.standard_normal(shape)
        else:
            value = 0.1 * rng.standard_normal(shape)
        inputs[name] = value.astype(np.float32)
    return inputs


def reference(X, lens, **w):
    """NumPy, one sequence at a time."""
    return rs.RaggedArray.from_list([layer(x, w) for x in X.to_list()], ragged_axes=[0])


def layer(x, w):
    """The encoder layer on one sequence x [m, HIDDEN] (float32 NumPy)."""
    m = len(x)
    qkv = (x @ w["Wqkv"].reshape(HIDDEN, -1) + w["bqkv"].reshape(-1)).reshape(m, 3, HEADS, DIM)
    q, k, v = (qkv[:, p].transpose(1, 0, 2) for p in range(3))  # [h, m, d]
    s = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(DIM))
    if m:
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
    a = (s @ v).transpose(1, 0, 2).reshape(m, HIDDEN)
    y = _layernorm(a @ w["Wo"].reshape(HIDDEN, HIDDEN) + w["bo"] + x, w["g1"], w["be1"])
    z = y @ w["W1"] + w["b1"]
    z = 0.5 * z * (1 + np.tanh(np.float32(GELU_C) * (z + np.float32(0.044715) * z ** 3)))
    return _layernorm(z @ w["W2"] + w["b2"] + y, w["g2"], w["be2"]).astype(np.float32)


def _layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(EPS)) * gamma + beta


def hand_schedule(funcs, rows=6, vectors=None):
    """Each product on packed tokens as linear.py's ``schedule_product`` (one GEMM over the batch's valid
    tokens, in tiles that cross entries, strips of 64 output columns in parallel); QKV's strips are of
    (t, h) pairs. Attention as in attention.py, the layer norms one token at a time, entries in
    parallel."""
    vec = rs.natural_vector_size(rs.float32)
    width = vec * (vectors or (4 if vec >= 16 else 2))
    qkv = funcs["qkv"]
    qkv.fuse("b", "i", "bi").split("bi", "bo", "bt", rows, tail="split").split("d", "do", "di", width) \
        .reorder("t", "h", "bo", "do", "bt", "di").fuse("t", "h", "th").parallel("th") \
        .vectorize("di", vec).unroll("di").unroll("bt")
    tile_sum(funcs["qkv_sum"], qkv, "do", ("t", "h", "c.0", "bi", "d"))
    funcs["Wqkv"].in_(funcs["qkv_sum"]).compute_at(qkv, "th").vectorize("_3", vec)
    schedule_attention(funcs, funcs["a"], funcs["K"], rows)
    for name, sum_name, weights, reduce in (("proj", "proj_sum", "Wo", ("r.0", "r.1")),
                                            ("up", "up_sum", "W1", ("c.0",)), ("down", "down_sum", "W2", ("fr.0",))):
        schedule_product(funcs, funcs[name], funcs[sum_name], funcs[weights], reduce, rows, vectors)
    for name in ("y", "out"):
        f = funcs[name]
        f.parallel("b").vectorize("n", vec)
        for part in ("mean", "var"):
            funcs[f"{name}_{part}"].compute_at(f, "i")


def gpu_schedule(funcs, rows=16, cols=16):
    """Each product as batched_gemm's GPU schedule: the valid (sequence, token) pairs flattened (no padded
    token), blocks of ``rows`` tokens by ``cols`` output columns, each thread's sum over k in a register.
    Attention as attention.py's GPU schedule; each layer norm's mean and variance one warp per token
    (shuffles), the normalized values one thread per (token, column)."""
    for name in "QKV":
        funcs[name].compute_inline()
    qkv = funcs["qkv"]
    _gpu_rows_by_columns(qkv.fuse("t", "h", "th"), "d", rows, cols, "th")
    funcs["qkv_sum"].compute_at(qkv, "ni")
    schedule_attention_gpu(funcs, funcs["a"], 8)
    for name, sum_name in (("proj", "proj_sum"), ("up", "up_sum"), ("down", "down_sum")):
        f = funcs[name]
        _gpu_rows_by_columns(f, f.args[2].name, rows, cols)
        funcs[sum_name].compute_at(f, "ni")
    for name in ("y", "out"):
        _gpu_rows_by_columns(funcs[name], "n", rows, cols)
        for part in ("mean", "var"):
            funcs[f"{name}_{part}"].update(0).fuse("b", "i", "bi").gpu_blocks("bi").gpu_lanes("c.0")


def _gpu_rows_by_columns(f, n, rows, cols, *extra):
    """Blocks of ``rows`` flattened tokens by ``cols`` of column ``n`` (and one per value of the loops
    ``extra``), a thread per (token, column)."""
    f.fuse("b", "i", "bi").split("bi", "bo", "bt", rows).split(n, "no", "ni", cols, tail="guard") \
        .reorder("bo", *extra, "no", "bt", "ni").gpu_blocks("bo", *extra, "no").gpu_threads("bt", "ni")
