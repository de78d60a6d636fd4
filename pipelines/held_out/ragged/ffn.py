"""A transformer's feed-forward block at BERT-base's sizes (hidden 768, inner 3072) on a ragged batch of
tokens: out = X + gelu(X W1 + b1) W2 + b2, GELU in its tanh form (PyTorch's ``approximate="tanh"``, written
x / (1 + exp(-2u))). X and out are RaggedArrays [B, L, 768] on packed tokens. Held out: written after the
autoscheduler's rules for ragged products, which never saw it. The "full" inputs are the first 128
sequences of MNLI; "small" are 5 short ones."""

from pathlib import Path

import numpy as np

import ragsched as rs

try:
    from pipelines.linear import schedule_product
except ImportError:  # loaded by path from outside the repository root
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from pipelines.linear import schedule_product

HIDDEN, INNER = 768, 3072
GELU_C = float(np.sqrt(2 / np.pi))
LENGTHS = Path(__file__).resolve().parents[2] / "data" / "mnli_lengths.txt"
TOLERANCE = (1e-4, 1e-5)


def build():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, HIDDEN])
    W1, b1 = rs.Input("W1", rs.float32, [HIDDEN, INNER]), rs.Input("b1", rs.float32, [INNER])
    W2, b2 = rs.Input("W2", rs.float32, [INNER, HIDDEN]), rs.Input("b2", rs.float32, [HIDDEN])
    b, i, f, n = rs.vars("b i f n")
    c, r = rs.RDom(0, HIDDEN, name="c"), rs.RDom(0, INNER, name="r")
    ffn_in = rs.Func("ffn_in", dtype=rs.float32)
    ffn_in[b, i, f] = b1[f]
    ffn_in[b, i, f] += X[b, i, c] * W1[c, f]
    ffn_act = rs.Func("ffn_act", shape=[B, L, INNER])
    x = ffn_in[b, i, f]
    ffn_act[b, i, f] = x / (1.0 + rs.exp(-2.0 * GELU_C * (x + 0.044715 * x * x * x)))
    ffn_sum = rs.Func("ffn_sum", dtype=rs.float32)
    ffn_sum[b, i, n] = b2[n] + X[b, i, n]
    ffn_sum[b, i, n] += ffn_act[b, i, r] * W2[r, n]
    out = rs.Func("ffn", shape=[B, L, HIDDEN])
    out[b, i, n] = ffn_sum[b, i, n]
    return out


def inputs_for(lens, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    x = rs.RaggedArray.from_list([rng.standard_normal((int(m), HIDDEN)).astype(np.float32) for m in lens],
                                 ragged_axes=[0])
    return {"X": x, "lens": np.asarray(lens, np.int32),
            "W1": (rng.standard_normal((HIDDEN, INNER)) / np.sqrt(HIDDEN)).astype(np.float32),
            "b1": (0.1 * rng.standard_normal(INNER)).astype(np.float32),
            "W2": (rng.standard_normal((INNER, HIDDEN)) / np.sqrt(INNER)).astype(np.float32),
            "b2": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)}


def example_inputs(scale="small"):
    lens = np.array([5, 1, 0, 7, 3], np.int32) if scale == "small" else np.loadtxt(LENGTHS, dtype=np.int32)[:128]
    return inputs_for(lens)


def packed(X, W1, b1, W2, b2):
    """The block on packed tokens [tokens, HIDDEN] (float32 NumPy)."""
    z = X @ W1 + b1
    z = z / (1 + np.exp(np.float32(-2 * GELU_C) * (z + np.float32(0.044715) * z ** 3)))
    return (z @ W2 + b2 + X).astype(np.float32)


def reference(X, lens, W1, b1, W2, b2):
    """NumPy on the packed tokens (every token's block is independent of the others)."""
    out = packed(X.values.reshape(-1, HIDDEN), W1, b1, W2, b2)
    return rs.RaggedArray.from_list(np.split(out, np.cumsum(lens)[:-1]) if len(lens) else [], ragged_axes=[0])


def hand_schedule(funcs, rows=6, vectors=None):
    """Both products as linear.py's ``schedule_product`` (tiles of tokens across entries, strips of 64
    columns in parallel); the GELU applied as the first product's tiles are copied out."""
    schedule_product(funcs, funcs["ffn_act"], funcs["ffn_in"], funcs["W1"], ("c.0",), rows, vectors)
    funcs["ffn_act"].compute_root()
    schedule_product(funcs, funcs["ffn"], funcs["ffn_sum"], funcs["W2"], ("r.0",), rows, vectors)
