"""Halide baselines for the benchmark: our pipelines' algorithms written with the ``halide`` package.

Each app is the algorithm of the pipeline file of the same name (and of Halide's apps/ folder), with
(a) the CPU hand schedule of Halide's app (the generator's non-autoscheduled, non-GPU branch), and
(b) the schedules of the three autoschedulers that ship in the wheel: Mullapudi2016, Adams2019 (its
cost-model weights are compiled into the plugin, so no weights file is needed) and Li2018.
``halide_variants(name, inputs)`` JIT-compiles each once for the given NumPy inputs and returns
zero-argument callables; a variant that cannot be built is returned as a string saying why.

Index order: Halide's first dimension is the innermost (x), NumPy's last is. ``hl.Buffer(array)``
reverses the axes (its default ``reverse_axes=True``) without copying, so a C-contiguous array of
shape (H, W) is a Halide buffer of extents (W, H). The algorithms below are therefore written in
Halide's argument order, the reverse of the pipeline files' NumPy order.

Threads: the Halide runtime shared by JIT-compiled code reads ``HL_NUM_THREADS`` (the number of
threads that work, the caller included) once, when its thread pool starts at the first parallel
loop, and the Python bindings expose no ``halide_set_num_threads``. So the count is set before the
first run and cannot change within a process. The autoschedulers get it as their ``parallelism``,
and estimates equal to the actual sizes of the inputs and the output.
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.held_out import NAMES as HELD_OUT_NAMES

try:
    import halide as hl
except ImportError:  # the benchmark and the tests skip the baselines
    hl = None

VARIANTS = ("hand", "Mullapudi2016", "Adams2019", "Li2018")
#: Apps on which Halide's three autoschedulers (Adams2019 greedy) took over 20 s together on small inputs
#: (AMD EPYC, 2026-12: local_laplacian 23 s, stencil_chain 18 s, interpolate 16 s; the others 1-5 s):
#: the tests check their hand schedules only, the benchmark every variant (at full scale, before timing).
SLOW_TO_AUTOSCHEDULE = frozenset({"local_laplacian", "stencil_chain", "interpolate"})


def variants_to_test(name: str) -> tuple[str, ...]:
    """The variants the tests build for app ``name``: its hand schedule alone where the autoschedulers are slow."""
    return ("hand",) if name in SLOW_TO_AUTOSCHEDULE else VARIANTS
_PLUGINS = {"Mullapudi2016": "mullapudi2016", "Adams2019": "adams2019", "Li2018": "li2018"}
_loaded: set[str] = set()
_threads: int | None = None


def available() -> bool:
    return hl is not None


def _f32(v):
    """A float32 constant (the halide package warns when a Python float is narrowed implicitly)."""
    return hl.f32(float(v))


def _vars(names: str):
    return tuple(hl.Var(n) for n in names.split())


@dataclass
class _App:
    """One algorithm, built fresh for each variant (schedules mutate Funcs)."""

    inputs: list  # (pipeline-file input name, ImageParam), in call order
    output: object  # the output hl.Func
    out_shape: tuple  # NumPy shape of the output
    hand: Callable  # hand(target): applies the app's CPU schedule
    out_min: tuple | None = None  # the output's Halide mins, when not 0
    estimates: Callable | None = None  # extra estimates on intermediate Funcs for the autoschedulers
    bounds: Callable | None = None  # constraints every variant gets (conv_layer's fixed sizes)
    out_dtype: type = np.float32  # the output's NumPy type


# ---------------------------------------------------------------------------------------- the apps
def _blur(shapes) -> _App:
    """apps/blur (float32 here, as pipelines/blur.py; the app is uint16)."""
    H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 2, "img")
    x, y = _vars("x y")
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (img[x, y] + img[x + 1, y] + img[x + 2, y]) / 3
    blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) / 3

    def hand(target):
        yi = hl.Var("yi")
        blur_y.split(y, y, yi, 32).parallel(y).vectorize(x, 16)
        blur_x.store_at(blur_y, y).compute_at(blur_y, x).vectorize(x, 16)

    return _App([("img", img)], blur_y, (H - 2, W - 2), hand)


def _unsharp(shapes) -> _App:
    """apps/unsharp; the kernel's argument is cast to float first, as in pipelines/unsharp.py."""
    from pipelines.unsharp import RADIUS, SIGMA

    _, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y, c = _vars("x y c")
    kernel = hl.Func("kernel")
    kf = hl.cast(hl.Float(32), x)
    kernel[x] = hl.exp(-kf * kf / _f32(2 * SIGMA * SIGMA)) / _f32(math.sqrt(2 * math.pi) * SIGMA)
    bounded = hl.BoundaryConditions.repeat_edge(img)
    gray = hl.Func("gray")
    gray[x, y] = _f32(0.299) * bounded[x, y, 0] + _f32(0.587) * bounded[x, y, 1] + _f32(0.114) * bounded[x, y, 2]
    blur_y, blur_x = hl.Func("blur_y"), hl.Func("blur_x")
    e = kernel[0] * gray[x, y]
    for d in range(1, RADIUS + 1):
        e = e + kernel[d] * (gray[x, y - d] + gray[x, y + d])
    blur_y[x, y] = e
    e = kernel[0] * blur_y[x, y]
    for d in range(1, RADIUS + 1):
        e = e + kernel[d] * (blur_y[x - d, y] + blur_y[x + d, y])
    blur_x[x, y] = e
    sharpen, ratio, output = hl.Func("sharpen"), hl.Func("ratio"), hl.Func("unsharp")
    sharpen[x, y] = 2 * gray[x, y] - blur_x[x, y]
    ratio[x, y] = sharpen[x, y] / gray[x, y]
    output[x, y, c] = ratio[x, y] * img[x, y, c]

    def hand(target):
        yo, yi = _vars("yo yi")
        vec = target.natural_vector_size(hl.Float(32))
        output.split(y, yo, yi, 32).vectorize(x, vec).parallel(yo).reorder(x, c, yi, yo)
        gray.compute_at(output, yi).store_at(output, yo).vectorize(x, vec)
        blur_y.compute_at(output, yi).store_at(output, yo).vectorize(x, vec)
        ratio.compute_at(output, yi).store_at(output, yo).vectorize(x, vec)

    return _App([("img", img)], output, (3, H, W), hand)


def _harris(shapes) -> _App:
    """apps/harris. The output is the app's response at [2, W - 2) x [2, H - 2): its buffer's min is 2."""
    _, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y = _vars("x y")
    gray = hl.Func("gray")
    gray[x, y] = _f32(0.299) * img[x, y, 0] + _f32(0.587) * img[x, y, 1] + _f32(0.114) * img[x, y, 2]
    k1, k2 = _f32(1 / 12), _f32(2 / 12)
    Iy, Ix = hl.Func("Iy"), hl.Func("Ix")
    Iy[x, y] = (gray[x - 1, y - 1] * -k1 + gray[x - 1, y + 1] * k1 + gray[x, y - 1] * -k2
                + gray[x, y + 1] * k2 + gray[x + 1, y - 1] * -k1 + gray[x + 1, y + 1] * k1)
    Ix[x, y] = (gray[x - 1, y - 1] * -k1 + gray[x + 1, y - 1] * k1 + gray[x - 1, y] * -k2
                + gray[x + 1, y] * k2 + gray[x - 1, y + 1] * -k1 + gray[x + 1, y + 1] * k1)
    Ixx, Iyy, Ixy = hl.Func("Ixx"), hl.Func("Iyy"), hl.Func("Ixy")
    Ixx[x, y] = Ix[x, y] * Ix[x, y]
    Iyy[x, y] = Iy[x, y] * Iy[x, y]
    Ixy[x, y] = Ix[x, y] * Iy[x, y]

    def sum3x3(f):
        terms = [f[x + dx, y + dy] for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
        e = terms[0]
        for t in terms[1:]:
            e = e + t
        return e

    Sxx, Syy, Sxy = hl.Func("Sxx"), hl.Func("Syy"), hl.Func("Sxy")
    Sxx[x, y], Syy[x, y], Sxy[x, y] = sum3x3(Ixx), sum3x3(Iyy), sum3x3(Ixy)
    det, trace, output = hl.Func("det"), hl.Func("trace"), hl.Func("harris")
    det[x, y] = Sxx[x, y] * Syy[x, y] - Sxy[x, y] * Sxy[x, y]
    trace[x, y] = Sxx[x, y] + Syy[x, y]
    output[x, y] = det[x, y] - _f32(0.04) * trace[x, y] * trace[x, y]

    def hand(target):
        yi = hl.Var("yi")
        vec = target.natural_vector_size(hl.Float(32))
        output.split(y, y, yi, 32).parallel(y).vectorize(x, vec)
        for f in (gray, Ix, Iy):
            f.store_at(output, y).compute_at(output, yi).vectorize(x, vec)
        Ix.compute_with(Iy, x)

    return _App([("img", img)], output, (H - 4, W - 4), hand, out_min=(2, 2))


def _matmul(shapes) -> _App:
    """C = A B. Halide's apps have no plain matmul; the hand schedule is the one of Halide's
    test/performance/matrix_multiplication.cpp for AVX2 (a 3-vector x 4-row register tile, the reduction
    split in blocks of 64 and factored with rfactor, parallel over output strips), its tile sizes
    (M / 4 rows, K / 16) derived from the inputs' sizes instead of a fixed 992."""
    M, K = shapes["A"]
    _, N = shapes["B"]
    A = hl.ImageParam(hl.Float(32), 2, "A")  # A(k, i)
    B = hl.ImageParam(hl.Float(32), 2, "B")  # B(j, k)
    x, y = _vars("x y")
    k = hl.RDom([hl.Range(0, A.width())], "k")
    prod, out = hl.Func("prod"), hl.Func("C")
    prod[x, y] = _f32(0)
    prod[x, y] += A[k, y] * B[x, k]
    out[x, y] = prod[x, y]

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        tile_x, tile_y, tile_k = 3 * vec, max(4, min(256, M // 4 * 4)), max(8, min(64, K // 16))
        xi, yi, yii, xy, z = _vars("xi yi yii xy z")
        ko, ki = hl.RVar("ko"), hl.RVar("ki")
        out.tile(x, y, xi, yi, tile_x, tile_y).split(yi, yi, yii, 4).vectorize(xi, vec).unroll(xi).unroll(yii) \
            .fuse(x, y, xy).parallel(xy)
        prod.update().split(k, ko, ki, tile_k)
        intm = prod.update().rfactor(ko, z)
        intm.compute_at(prod, y).vectorize(x, vec).unroll(x).unroll(y)
        intm.update(0).reorder(x, y, ki).vectorize(x, vec).unroll(x).unroll(y)
        prod.compute_at(out, xy).vectorize(x, vec).unroll(x)
        prod.update().split(y, y, yi, 4).reorder(x, yi, y, ko).vectorize(x, vec).unroll(x).unroll(yi)

    return _App([("A", A), ("B", B)], out, (M, N), hand)


def _local_laplacian(shapes) -> _App:
    """apps/local_laplacian with float32 [0, 1] input and output and constant parameters, as
    pipelines/local_laplacian.py explains."""
    from pipelines.local_laplacian import ALPHA, BETA, EPS, LEVELS, J

    _, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y, c, k = _vars("x y c k")

    downys = {}  # the name of each downsampled Func: its intermediate downy

    def downsample(f, lead):
        downx, downy = hl.Func(), hl.Func()
        downys[downx.name()] = downy
        downy[(x, y, *lead)] = (f[(x, 2 * y - 1, *lead)] + _f32(3) * (f[(x, 2 * y, *lead)] + f[(x, 2 * y + 1, *lead)])
                                + f[(x, 2 * y + 2, *lead)]) / _f32(8)
        downx[(x, y, *lead)] = (downy[(2 * x - 1, y, *lead)] + _f32(3) * (downy[(2 * x, y, *lead)]
                                                                          + downy[(2 * x + 1, y, *lead)])
                                + downy[(2 * x + 2, y, *lead)]) / _f32(8)
        return downx

    def upsample(f, lead):
        upx, upy = hl.Func(), hl.Func()
        upx[(x, y, *lead)] = hl.lerp(f[((x + 1) // 2, y, *lead)], f[((x - 1) // 2, y, *lead)],
                                     hl.cast(hl.Float(32), (x % 2) * 2 + 1) / _f32(4))
        upy[(x, y, *lead)] = hl.lerp(upx[(x, (y + 1) // 2, *lead)], upx[(x, (y - 1) // 2, *lead)],
                                     hl.cast(hl.Float(32), (y % 2) * 2 + 1) / _f32(4))
        return upy

    remap = hl.Func("remap")
    fx = hl.cast(hl.Float(32), x) / _f32(256)
    remap[x] = _f32(ALPHA) * fx * hl.exp(-fx * fx / _f32(2))
    clamped = hl.BoundaryConditions.repeat_edge(img)
    gray = hl.Func("gray")
    gray[x, y] = _f32(0.299) * clamped[x, y, 0] + _f32(0.587) * clamped[x, y, 1] + _f32(0.114) * clamped[x, y, 2]

    level = hl.cast(hl.Float(32), k) * _f32(1.0 / (LEVELS - 1))
    idx = hl.clamp(hl.cast(hl.Int(32), gray[x, y] * _f32(LEVELS - 1) * _f32(256)), 0, (LEVELS - 1) * 256)
    g = [hl.Func("gPyramid0")]
    g[0][x, y, k] = _f32(BETA) * (gray[x, y] - level) + level + remap[idx - 256 * k]
    for j in range(1, J):
        g.append(downsample(g[j - 1], (k,)))
    lap = [None] * J
    lap[J - 1] = g[J - 1]
    for j in range(J - 2, -1, -1):
        up = upsample(g[j + 1], (k,))
        lap[j] = hl.Func(f"lPyramid{j}")
        lap[j][x, y, k] = g[j][x, y, k] - up[x, y, k]
    in_g = [hl.Func("inGPyramid0")]
    in_g[0][x, y] = gray[x, y]
    for j in range(1, J):
        in_g.append(downsample(in_g[j - 1], ()))
    out_l = []
    for j in range(J):
        lv = in_g[j][x, y] * _f32(LEVELS - 1)
        li = hl.clamp(hl.cast(hl.Int(32), lv), 0, LEVELS - 2)
        lf = lv - hl.cast(hl.Float(32), li)
        f = hl.Func(f"outLPyramid{j}")
        f[x, y] = (_f32(1) - lf) * lap[j][x, y, li] + lf * lap[j][x, y, li + 1]
        out_l.append(f)
    out_g = [None] * J
    out_g[J - 1] = out_l[J - 1]
    for j in range(J - 2, -1, -1):
        up = upsample(out_g[j + 1], ())
        out_g[j] = hl.Func(f"outGPyramid{j}")
        out_g[j][x, y] = up[x, y] + out_l[j][x, y]
    color, output = hl.Func("color"), hl.Func("local_laplacian")
    color[x, y, c] = img[x, y, c] * (out_g[0][x, y] + _f32(EPS)) / (gray[x, y] + _f32(EPS))
    output[x, y, c] = hl.clamp(color[x, y, c], _f32(0), _f32(1))

    def hand(target):
        yo = hl.Var("yo")
        remap.compute_root()
        output.reorder(c, x, y).split(y, yo, y, 64).parallel(yo).vectorize(x, 8)
        gray.compute_root().never_partition([y]).parallel(y, 32).vectorize(x, 8)
        for j in range(1, 5):
            in_g[j].compute_root().parallel(y, 32).vectorize(x, 8)
            g[j].compute_root().reorder_storage(x, k, y).reorder(k, y).split(y, yo, y, 8).parallel(yo) \
                .vectorize(x, 8)
            out_g[j].store_at(output, yo).compute_at(output, y).fold_storage(y, 4) \
                .vectorize(x, 8, hl.TailStrategy.RoundUp)
            if j > 1:
                in_g[j].never_partition_all()
                g[j].never_partition_all()
        # The app clones gPyramid[0] into gPyramid[1] with a clone_in that newer Halide resolves to the
        # direct callers on the way (#9117); Halide 21 needs that direct caller, the downy inside.
        g[0].clone_in(downys[g[1].name()]).store_at(g[1], yo).compute_at(g[1], y).vectorize(x, 8)
        out_g[0].compute_at(output, y).hoist_storage(output, yo).vectorize(x, 8, hl.TailStrategy.RoundUp)
        for j in range(5, J):
            in_g[j].compute_root()
            g[j].compute_root().parallel(k)
            out_g[j].compute_root()

    return _App([("img", img)], output, (3, H, W), hand)


def _bilateral_grid(shapes) -> _App:
    """apps/bilateral_grid with r_sigma a constant, as pipelines/bilateral_grid.py."""
    from pipelines.bilateral_grid import INV_R, S

    H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 2, "img")
    x, y, z, c = _vars("x y z c")
    clamped = hl.BoundaryConditions.repeat_edge(img)
    r = hl.RDom([hl.Range(0, S), hl.Range(0, S)], "r")
    val = hl.clamp(clamped[x * S + r.x - S // 2, y * S + r.y - S // 2], _f32(0), _f32(1))
    zi = hl.cast(hl.Int(32), val * _f32(INV_R) + _f32(0.5))
    histogram = hl.Func("histogram")
    histogram[x, y, z, c] = _f32(0)
    histogram[x, y, zi, c] += hl.mux(c, [val, _f32(1)])
    blurz, blurx, blury = hl.Func("blurz"), hl.Func("blurx"), hl.Func("blury")
    blurz[x, y, z, c] = (histogram[x, y, z - 2, c] + histogram[x, y, z - 1, c] * 4 + histogram[x, y, z, c] * 6
                         + histogram[x, y, z + 1, c] * 4 + histogram[x, y, z + 2, c])
    blurx[x, y, z, c] = (blurz[x - 2, y, z, c] + blurz[x - 1, y, z, c] * 4 + blurz[x, y, z, c] * 6
                         + blurz[x + 1, y, z, c] * 4 + blurz[x + 2, y, z, c])
    blury[x, y, z, c] = (blurx[x, y - 2, z, c] + blurx[x, y - 1, z, c] * 4 + blurx[x, y, z, c] * 6
                         + blurx[x, y + 1, z, c] * 4 + blurx[x, y + 2, z, c])
    val = hl.clamp(img[x, y], _f32(0), _f32(1))
    zv = val * _f32(INV_R)
    zi = hl.cast(hl.Int(32), zv)
    zf = zv - hl.cast(hl.Float(32), zi)
    xf = hl.cast(hl.Float(32), x % S) / _f32(S)
    yf = hl.cast(hl.Float(32), y % S) / _f32(S)
    xi, yi = x // S, y // S  # Halide's integer division rounds down too
    interpolated = hl.Func("interpolated")
    interpolated[x, y, c] = hl.lerp(
        hl.lerp(hl.lerp(blury[xi, yi, zi, c], blury[xi + 1, yi, zi, c], xf),
                hl.lerp(blury[xi, yi + 1, zi, c], blury[xi + 1, yi + 1, zi, c], xf), yf),
        hl.lerp(hl.lerp(blury[xi, yi, zi + 1, c], blury[xi + 1, yi, zi + 1, c], xf),
                hl.lerp(blury[xi, yi + 1, zi + 1, c], blury[xi + 1, yi + 1, zi + 1, c], xf), yf), zf)
    output = hl.Func("bilateral_grid")
    output[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]

    def estimates():
        histogram.set_estimate(z, -2, 16)
        for f in (blurz, blurx, blury):
            f.set_estimate(z, 0, 12)

    def hand(target):
        blurz.compute_at(blurx, y).reorder(c, z, x, y).vectorize(x, 8).unroll(c)
        histogram.compute_at(blurz, y)
        histogram.update().reorder(c, r.x, r.y, x, y).unroll(c)
        blurx.compute_root().reorder(c, x, z, y).parallel(y).vectorize(x, 8).unroll(c)
        blury.compute_at(output, y).store_in(hl.MemoryType.Stack).reorder(c, x, y, z) \
            .reorder_storage(c, z, x, y).vectorize(x, 8).unroll(c)
        output.compute_root().parallel(y, 8).vectorize(x, 8)

    return _App([("img", img)], output, (H, W), hand, estimates=estimates)


def _conv_layer(shapes) -> _App:
    """apps/conv_layer. As in the app, every variant is compiled for the inputs' exact sizes and strides."""
    n_, hp, wp, ci_ = shapes["input"]
    co_ = shapes["filter"][3]
    input = hl.ImageParam(hl.Float(32), 4, "input")  # (ci, x, y, n)
    filter = hl.ImageParam(hl.Float(32), 4, "filter")  # (co, kx, ky, ci)
    bias = hl.ImageParam(hl.Float(32), 1, "bias")
    c, x, y, n = _vars("c x y n")
    r = hl.RDom([hl.Range(0, ci_), hl.Range(0, 3), hl.Range(0, 3)], "r")
    conv, relu = hl.Func("conv"), hl.Func("relu")
    conv[c, x, y, n] = bias[c]
    conv[c, x, y, n] += filter[c, r.y, r.z, r.x] * input[r.x, x + r.y, y + r.z, n]
    relu[c, x, y, n] = hl.max(0, conv[c, x, y, n])

    def bounds():
        h, w = hp - 2, wp - 2
        for p, extents in ((relu.output_buffer(), (co_, w, h, n_)), (input, (ci_, wp, hp, n_)),
                           (filter, (co_, 3, 3, ci_)), (bias, (co_,))):
            stride = 1
            for d, e in enumerate(extents):
                p.dim(d).set_bounds(0, e).set_stride(stride)
                stride *= e

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        if target.has_feature(hl.TargetFeature.AVX512_Skylake) or (target.arch == hl.TargetArch.ARM
                                                                   and target.bits == 64):
            tile_w, tile_h = 4, 5
        elif target.arch == hl.TargetArch.X86:
            tile_w, tile_h = 3, 4
        else:
            tile_w, tile_h = 2, 4
        co, ci, xo, xi = _vars("co ci xo xi")
        relu.split(c, co, ci, vec * tile_w).split(x, xo, xi, tile_h).reorder(ci, xi, xo, y, n, co) \
            .vectorize(ci, vec).unroll(ci).unroll(xi).parallel(y).parallel(n).parallel(co)
        conv.compute_at(relu, xo).vectorize(c, vec).unroll(c).unroll(x).unroll(y)
        conv.update().reorder(c, x, y, r.x, r.y, r.z, n).vectorize(c, vec).unroll(c).unroll(x).unroll(y) \
            .unroll(r.x, 2)
        filter.in_().compute_at(conv, r.x).vectorize(hl._0, vec).unroll(hl._0).unroll(hl._3)
        input.in_().compute_at(conv, x).unroll(hl._0)

    return _App([("input", input), ("filter", filter), ("bias", bias)], relu, (n_, hp - 2, wp - 2, co_), hand,
                bounds=bounds)


APPS = {"blur": _blur, "unsharp": _unsharp, "harris": _harris, "matmul": _matmul,
        "local_laplacian": _local_laplacian, "bilateral_grid": _bilateral_grid, "conv_layer": _conv_layer}


def _held_out_app(name: str) -> Callable:
    def build(shapes):
        return importlib.import_module(f"benchmarks.halide_held_out.{name}").app(shapes)

    return build


#: the held-out suite's Halide versions, by the name of their pipeline file in pipelines/held_out/
HELD_OUT_APPS = {name: _held_out_app(name) for name in HELD_OUT_NAMES}


# ------------------------------------------------------------------------------------- compiling
class HalideVariant:
    """A compiled variant: call it (no arguments) to run it; it returns its preallocated output array,
    which the next call overwrites."""

    def __init__(self, fn, schedule_s: float, compile_s: float, schedule: str):
        self._fn = fn
        self.schedule_s, self.compile_s, self.schedule = schedule_s, compile_s, schedule

    def __call__(self) -> np.ndarray:
        return self._fn()


def _use_threads(threads: int) -> None:
    global _threads
    if _threads is None:
        os.environ["HL_NUM_THREADS"] = str(threads)
        _threads = threads
    elif _threads != threads:
        raise ValueError(f"the Halide runtime of this process already runs {_threads} threads; "
                         f"it cannot change to {threads}")


def _load_plugin(variant: str) -> None:
    if variant not in _PLUGINS:
        raise ValueError(f"unknown variant {variant!r}; there are {', '.join(VARIANTS)}")
    if variant not in _loaded:
        lib = os.path.join(os.path.dirname(hl.__file__), "lib64", f"libautoschedule_{_PLUGINS[variant]}.so")
        hl.load_plugin(lib)
        _loaded.add(variant)


def _estimate(app: _App, shapes: dict) -> None:
    for name, p in app.inputs:
        p.set_estimates([hl.Range(0, e) for e in reversed(shapes[name])])
    mins = app.out_min or (0,) * len(app.out_shape)
    app.output.set_estimates([hl.Range(m, e) for m, e in zip(mins, reversed(app.out_shape), strict=True)])
    if app.estimates:
        app.estimates()


def _compile(name: str, inputs: dict, variant: str, threads: int, autoscheduler_params: dict) -> HalideVariant:
    shapes = {k: v.shape for k, v in inputs.items()}
    app = {**APPS, **HELD_OUT_APPS}[name](shapes)
    target = hl.get_jit_target_from_environment()
    pipeline = hl.Pipeline(app.output)
    if app.bounds:
        app.bounds()
    t0 = time.perf_counter()
    if variant == "hand":
        app.hand(target)
        schedule = "the app's CPU schedule"
    else:
        _load_plugin(variant)
        _estimate(app, shapes)
        params = {"parallelism": str(threads), **autoscheduler_params.get(variant, {})}
        result = pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(variant, params))
        schedule = result.schedule_source
    t1 = time.perf_counter()
    fn = pipeline.compile_to_callable([p for _, p in app.inputs], target)
    t2 = time.perf_counter()
    arrays = [np.ascontiguousarray(inputs[n]) for n, _ in app.inputs]
    buffers = [hl.Buffer(a) for a in arrays]
    out = np.empty(app.out_shape, app.out_dtype)
    out_buffer = hl.Buffer(out)
    if app.out_min:
        out_buffer.set_min(list(app.out_min))

    def run(arrays=arrays):  # the arrays stay alive with the buffers that point into them
        fn(*buffers, out_buffer)
        return out

    run()  # a schedule may compile and still fail when it runs (reading outside an input, ...)
    return HalideVariant(run, t1 - t0, t2 - t1, schedule)


def halide_variants(name: str, inputs: dict, threads: int = 2, variants=VARIANTS,
                    autoscheduler_params: dict | None = None) -> dict:
    """``{variant: HalideVariant or error string}`` for pipeline ``name`` and its NumPy ``inputs`` (a dict
    from ``example_inputs(scale)``). ``autoscheduler_params`` adds or overrides parameters per
    autoscheduler, e.g. ``{"Adams2019": {"beam_size": "1"}}`` for a fast greedy search."""
    if hl is None:
        return {v: "the halide package is not installed" for v in variants}
    if name not in APPS and name not in HELD_OUT_APPS:
        raise KeyError(f"no Halide version of {name}; there are {', '.join(sorted({**APPS, **HELD_OUT_APPS}))}")
    _use_threads(threads)
    out = {}
    for v in variants:
        try:
            out[v] = _compile(name, inputs, v, threads, autoscheduler_params or {})
        except Exception as err:  # a Halide or autoscheduler error: report it, keep going
            out[v] = f"{v} failed: {type(err).__name__}: {str(err).strip()[:500]}"
    return out
