"""Ragged multi-head attention (the core of a transformer layer) over a batch of sequences of different
lengths: O = softmax(Q K^T / sqrt(64)) V per sequence and head, with no padded position computed.

Q, K and V are RaggedArrays [B, L, 8, 64] (entry b has lens[b] tokens); the scores S[b, h, i, j] exist
for i, j < lens[b] only, and so does every step after. The "full" inputs are the first 128 sequences of
MNLI (mean length 43, max 128), "long" the first 32 of RACE (mean 350, max 512); "small" are 5 short ones.
"""

from pathlib import Path

import numpy as np

import ragsched as rs

HEADS, DIM = 8, 64
LENGTHS = Path(__file__).resolve().parent / "data" / "mnli_lengths.txt"
#: "full": the first 128 sequences of MNLI (mean length 43); "long": the first 32 of RACE (mean 350, up to
#: 512), where the same kernel's work lies in entries whose scores leave the caches
SCALES = ("small", "full", "long")


def build():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q, K, V = (rs.Input(n, rs.float32, [B, L, HEADS, DIM]) for n in "QKV")
    return attention_core(Q, K, V, lens, (B, L, HEADS, DIM), "attention")


def attention_core(Q, K, V, lens, shape, name):
    """The Func ``name`` of ``shape`` [B, L, heads, dim] (L ragged by ``lens``): attention of ``Q``,
    ``K``, ``V`` (Inputs or Funcs read as [b, i, h, d]). Every intermediate is named (``ATTENTION_FUNCS``)
    so that a larger pipeline can schedule this part."""
    B, L, heads, dim = shape
    b, h, i, j, d = rs.vars("b h i j d")
    k = rs.RDom(0, dim, name="k")
    # unscaled scores (the scale is applied after the max), summed in QK, copied to S: a schedule can
    # then compute the sum per tile of S, in registers (as matmul's prod and C)
    QK = rs.Func("QK", dtype=rs.float32)
    QK[b, h, i, j] = 0.0
    QK[b, h, i, j] += Q[b, i, h, k] * K[b, j, h, k]
    S = rs.Func("S", shape=[B, heads, L, L])
    S[b, h, i, j] = QK[b, h, i, j]
    rj = rs.RDom(0, lens[b], name="rj")
    top = rs.Func("top", shape=[B, heads, L], dtype=rs.float32)
    top[b, h, i] = float("-inf")
    top[b, h, i] = rs.max(top[b, h, i], S[b, h, i, rj])
    scale = float(1 / np.sqrt(dim))  # a Python float: weak, so the scores stay float32
    P = rs.Func("P", shape=[B, heads, L, L])
    P[b, h, i, j] = rs.exp((S[b, h, i, j] - top[b, h, i]) * scale)
    den = rs.Func("den", shape=[B, heads, L], dtype=rs.float32)
    den[b, h, i] = 0.0
    den[b, h, i] += P[b, h, i, rj]
    inv = rs.Func("inv", shape=[B, heads, L])  # 1 / the softmax denominator: one division per row
    inv[b, h, i] = 1.0 / den[b, h, i]
    PV = rs.Func("PV", dtype=rs.float32)
    PV[b, h, i, d] = 0.0
    PV[b, h, i, d] += P[b, h, i, rj] * V[b, rj, h, d]
    O = rs.Func(name, shape=[B, L, heads, dim])
    O[b, i, h, d] = PV[b, h, i, d] * inv[b, h, i]
    return O


ATTENTION_FUNCS = ("QK", "S", "top", "P", "den", "inv", "PV")


def example_lengths(scale: str) -> np.ndarray:
    """The sequence lengths of the example inputs of ``scale`` (``SCALES``)."""
    if scale == "small":
        return np.array([5, 1, 0, 7, 3], np.int32)
    if scale == "long":
        return np.loadtxt(LENGTHS.with_name("race_lengths.txt"), dtype=np.int32)[:32]
    return np.loadtxt(LENGTHS, dtype=np.int32)[:128]


def example_inputs(scale="small"):
    lens = example_lengths(scale)
    rng = np.random.default_rng(0)

    def tokens():
        return rs.RaggedArray.from_list([rng.standard_normal((n, HEADS, DIM)).astype(np.float32) for n in lens],
                                        ragged_axes=[0])
    return {"Q": tokens(), "K": tokens(), "V": tokens(), "lens": lens}


def reference(Q, K, V, lens):
    """NumPy, one sequence at a time."""
    out = []
    for q, k, v in zip(Q.to_list(), K.to_list(), V.to_list(), strict=True):
        s = np.einsum("ihd,jhd->hij", q, k) / np.float32(np.sqrt(DIM))
        if len(q):
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
        out.append(np.einsum("hij,jhd->ihd", s, v).astype(np.float32))
    return rs.RaggedArray.from_list(out, ragged_axes=[0])


def hand_schedule(funcs, rows=6, score_vectors=None, reduce_rows=0, pad=True, **options):
    """One (sequence, head) pair per iteration of a parallel loop over both (fused: sequences of very
    different lengths balance over the threads), every intermediate computed there (its storage one
    head of one entry: S fits in L2 even for 512 tokens): ``schedule_attention`` (``options``: its
    keywords)."""
    schedule_attention(funcs, funcs["attention"], funcs["K"], rows, score_vectors, reduce_rows, pad=pad, **options)


def schedule_attention(funcs, out, K, rows=6, score_vectors=None, reduce_rows=0, sort=False, pad=True, key_blocks=True,
                       scores="tiles", dot_rows=1, lanes="rows", panel=True):
    """The attention hand schedule of ``out`` (made by ``attention_core``) reading keys ``K``: one (sequence,
    head) pair per iteration of a parallel loop, every intermediate computed there; with ``lanes="heads"``
    ``_heads_schedule`` instead (queries ``funcs["Q"]``). The scores as
    ``_score_tiles`` (``scores="tiles"``) or ``_score_dots`` (``"dot"``). The row maxima and sums are
    vector reductions along the row (partial results in the lanes of one vector, combined at the end of
    the row), or with ``reduce_rows`` > 1 scalar chains of that many rows side by side (1.05-1.13x slower
    on AVX-512, MNLI b128). P V runs ``rows`` rows by as many vectors of d as the registers hold, j
    outside, reading with ``panel`` a copy of the head's rows of V made contiguous per (entry, head) (in V
    they are a token of every head apart, and a strip of d down a long entry falls in few cache sets:
    1.2x on RACE b32). Whole tiles and the rest of each entry are separate loops (tail="split"), and the
    unrolled loops run serially in the rest."""
    if scores not in ("tiles", "dot"):
        raise ValueError(f"schedule_attention: scores={scores!r}; it takes 'tiles' or 'dot'")
    if lanes not in ("rows", "heads"):
        raise ValueError(f"schedule_attention: lanes={lanes!r}; it takes 'rows' or 'heads'")
    vec = rs.natural_vector_size(rs.float32)
    if lanes == "heads":
        _heads_schedule(funcs, out, funcs["Q"], K, rows, vec)
        return
    b, i, h, d = (a.name for a in out.args)
    if sort:  # longest sequences first (measured no faster here, with dynamic chunks of 8 pairs)
        out.sort_by_length(b)
    out.reorder(b, h, i, d).fuse(b, h, "bh").vectorize(d, vec).parallel("bh")
    for name in ATTENTION_FUNCS:
        if name != "QK":
            funcs[name].compute_at(out, "bh")
    if scores == "dot":
        _score_dots(funcs, out, K, vec, dot_rows)
    else:
        _score_tiles(funcs, out, K, vec, rows, score_vectors, pad, key_blocks)
    _softmax_and_pv(funcs, rows, reduce_rows, vec)
    if panel:
        Vp = funcs["V"].in_(funcs["PV"])
        vb, vi, vh, vd = (a.name for a in Vp.args)
        Vp.compute_at(out, "bh").reorder_storage(vb, vh, vi, vd).reorder(vb, vh, vi, vd).vectorize(vd, vec)


def _heads_schedule(funcs, out, Q, K, rows, vec):
    """Every intermediate computed per sequence, all heads at once, each stored with the heads innermost
    and vectorized along them (a vector is one score of every head: short rows need no padding and leave
    no scalar rest; the heads must be a whole number of vectors). Q K^T in tiles of ``rows`` rows by 2
    keys (12 vectors of accumulators) from copies of Q and K stored k-major, heads innermost; P V as in
    ``_softmax_and_pv``. An entry's scores of every head stay in L2 up to about 90 tokens."""
    b, i, h, d = (a.name for a in out.args)
    out.reorder(b, h, i, d).vectorize(d, vec).parallel(b)
    for name in ATTENTION_FUNCS:
        if name != "QK":
            funcs[name].compute_at(out, b)
    S, QK, P = funcs["S"], funcs["QK"], funcs["P"]
    for f in (S, QK, P):
        f.reorder_storage("b", "i", "j", "h")
    for name in ("top", "den", "inv"):
        funcs[name].reorder_storage("b", "i", "h").reorder("b", "i", "h").vectorize("h")
    S.split("i", "io", "ii", rows, tail="split").split("j", "jo", "ji", 2, tail="split") \
        .reorder("b", "io", "jo", "ii", "ji", "h").vectorize("h").unroll("ii").unroll("ji")
    QK.compute_at(S, "jo").reorder("b", "i", "j", "h").vectorize("h").unroll("i").unroll("j")
    QK.update().reorder("b", "k.0", "i", "j", "h").vectorize("h").unroll("i").unroll("j")
    for X in (Q, K):
        copy = X.in_(QK)
        xb, xi, xh, xk = (a.name for a in copy.args)
        copy.compute_at(out, b).reorder_storage(xb, xi, xk, xh)
        copy.split(xk, "xko", "xki", vec, tail="split").reorder(xb, xi, "xko", "xki", xh).vectorize(xh).unroll("xki")
    for name in ("top", "den"):
        funcs[name].update().reorder("b", "i", "rj.0", "h").vectorize("h")
    P.reorder("b", "i", "j", "h").vectorize("h")
    _pv_tiles(funcs["PV"], rows, vec)


def _score_tiles(funcs, out, K, vec, rows, score_vectors, pad, key_blocks):
    """Q K^T register-tiled like matmul's hand schedule: S in tiles of ``rows`` rows by ``score_vectors``
    vectors (by default as many as fill 16 or 32 vector registers), the sum QK computed per tile with k
    outside the unrolled rows (its accumulators stay in registers) from a copy of K stored k-major (a row
    of keys is contiguous). With ``pad`` a row of scores is computed in whole tiles of columns (the padded
    scores, from keys past the entry's end that the copy of K leaves unwritten in its padded storage, are
    never read: the softmax reads the entry's own); with ``key_blocks`` that copy runs in blocks of vec x
    vec (transposed in registers)."""
    S, QK = funcs["S"], funcs["QK"]
    # [b, j, h, k] stored k-major: a row of scores reads contiguous keys. Without ``key_blocks`` the copy
    # runs in K's order (k innermost: contiguous reads, strided writes; in the storage's order its vectors
    # were gathers of keys 2 KB apart, 19% of attention's time on AVX-512). With it, in vec x vec blocks:
    # a vector down each of vec unrolled columns, which the backend loads as vec rows and transposes in
    # registers (1.06-1.10x on MNLI and RACE b128, AVX-512; the rest of an entry's keys as before)
    Kt = K.in_(QK)
    kb, kj, kh, kk = (a.name for a in Kt.args)
    Kt.compute_at(out, "bh").reorder_storage(kb, kh, kk, kj).reorder(kb, kh, kj, kk)
    if key_blocks:
        Kt.split(kj, "kjo", "kji", vec, tail="split").split(kk, "kko", "kki", vec, tail="split") \
            .reorder(kb, kh, "kjo", "kko", "kki", "kji").vectorize("kji").unroll("kki")
    sw = vec * (score_vectors or (1 if vec >= 16 else 2))  # rows x sw / vec accumulators: 6 or 12 registers
    if pad:  # a row's scores in whole tiles: no scalar rest (a fifth of the time), 1.32x faster on MNLI b128
        for stage in (S, QK, QK.update()):
            stage.pad("j", sw)
    S.split("i", "io", "ii", rows, tail="split").split("j", "jo", "ji", sw, tail="split") \
        .reorder("b", "h", "io", "jo", "ii", "ji")
    QK.compute_at(S, "jo").unroll("i")
    QK.update().reorder("b", "h", "k.0", "i", "j").unroll("i")
    for stage, j in ((S, "ji"), (QK, "j"), (QK.update(), "j")):
        stage.vectorize(j)  # sw lanes: LLVM splits them into native vectors


def _score_dots(funcs, out, K, vec, dot_rows):
    """Each score a dot product of a row of Q and a row of K, vectorized along k: no padded score and no
    transposed copy. S in tiles of ``dot_rows`` rows by vec / ``dot_rows`` keys, each score's partial sums
    in a vector register across k, the tile's vectors combined into one at the end (the backend's
    ``batch_reductions``). Keys copied per head first: rows 2 KB apart in K share a few L1 sets. On
    AVX-512 (2 threads) against the padded tiles: CoLA b128 1.0-1.1x, MNLI 0.75-0.85x, RACE 0.6x (each row
    reads all of a long entry's keys)."""
    S, QK = funcs["S"], funcs["QK"]
    S.split("i", "io", "ii", dot_rows, tail="split").split("j", "jo", "ji", vec // dot_rows, tail="split") \
        .reorder("b", "h", "io", "jo", "ii", "ji").vectorize("ji")
    Kc = K.in_(QK)
    Kc.compute_at(out, "bh").vectorize(Kc.args[3].name, vec)
    QK.compute_at(S, "jo").unroll("i").unroll("j")
    QK.update().split("k.0", "ko", "ki", vec, tail="split").reorder("b", "h", "ko", "i", "j", "ki") \
        .vectorize("ki").unroll("i").unroll("j")


def _softmax_and_pv(funcs, rows, reduce_rows, vec):
    PV = funcs["PV"]
    funcs["P"].vectorize("j", vec)
    for name in ("top", "den"):
        if reduce_rows > 1:  # rows' reductions interleaved: independent chains, not one
            funcs[name].update().split("i", "io", "ii", reduce_rows, tail="split") \
                .reorder("b", "h", "io", "rj.0", "ii").unroll("ii")
        else:  # along the row, a vector of partial results
            funcs[name].update().split("rj.0", "ro", "ri", vec, tail="guard").vectorize("ri")
    _pv_tiles(PV, rows, vec)


def _pv_tiles(PV, rows, vec):
    """P V in register tiles of ``rows`` rows by as many vectors of d as the registers hold, j outside."""
    PV.bound("d", 0, DIM).vectorize("d", vec)
    width = vec * (4 if vec >= 16 else 2)  # rows x width accumulators fill 32 vector registers, or 16
    PV.update().split("d", "dt", "dd", width).split("i", "io", "ii", rows, tail="split") \
        .split("dd", "do", "di", vec).reorder("b", "h", "dt", "io", "rj.0", "ii", "do", "di") \
        .vectorize("di").unroll("do").unroll("ii")


def gpu_schedule(funcs, rows=8):
    """``schedule_attention_gpu`` of the output."""
    schedule_attention_gpu(funcs, funcs["attention"], rows)


def schedule_attention_gpu(funcs, out, rows=8):
    """The valid (sequence, token) pairs of ``out`` (made by ``attention_core``) flattened into one loop (no
    padded token), ``rows`` tokens by one head per block and one thread per (token, feature); each thread
    sums P V over the keys in a register. The row maxima and sums of the softmax run one warp per (token,
    head), reduced with shuffles; the scores and exponentials take the default GPU schedule (flattened
    pairs)."""
    b, i, h, d = (a.name for a in out.args)
    out.fuse(b, i, "bi").split("bi", "bo", "bt", rows).reorder("bo", h, "bt", d) \
        .gpu_blocks("bo", h).gpu_threads("bt", d)
    funcs["PV"].compute_at(out, d)
    funcs["inv"].compute_at(out, d)
    for name in ("top", "den"):  # each row's max and sum: one warp per (token, head), its lanes over the keys
        funcs[name].update(0).reorder("b", "i", "h", "rj.0").fuse("b", "i", "bi").gpu_blocks("bi", "h") \
            .gpu_lanes("rj.0")
