"""LLVM backend: the loop IR as LLVM IR (llvmlite), optimised at O3 for the host CPU, as object code.

A kernel is one function ``i32 name(ptr args)``: ``args`` is an array of 8-byte slots, one per
``LoweredKernel.arguments`` entry (buffer addresses, int64 scalars, float64 Params). It unpacks the
slots and calls ``name.impl`` whose buffer parameters are ``noalias``, so LLVM vectorizes without
runtime alias checks. It returns 0, or 1 when an allocation failed.

Vector expressions (``Ramp``, ``Broadcast``, any node whose dtype has lanes, produced by
``passes.vectorize``) become LLVM vector instructions. An ``IfThenElse`` with a vector condition
predicates its body: the code runs unmasked when every lane is active, masked (masked loads and
stores) when some are, and not at all when none are. A ``For`` of kind PARALLEL is outlined and run
through libgomp's ``GOMP_parallel`` (see ``_Parallel._parallel_for``).

Modules: ``machine`` (LLVM initialisation, target machines, DType to LLVM type), ``emit`` (the emitter
core and ``emit_module``) with the emitter's mixins ``vector_memory`` (loads, stores, predication),
``math_calls`` (math calls), ``parallel`` (parallel loops through libgomp) and ``scratch`` (scratch buffers),
``load`` (O3, object code and assembly, linking into the process with ORC's JITLink) and ``backend``
(``LlvmBackend``, behind the seam of ``codegen/backend.py``). Only this package imports llvmlite
(besides ``codegen.target``).
"""

from .emit import emit_module
from .load import LoadedObject, assembly, optimize_to_object
from .machine import ll_type, mem_type, natural_vector_size, target_key, type_suffix
from .scratch import release_symbol

__all__ = [
    "LoadedObject",
    "assembly",
    "emit_module",
    "ll_type",
    "mem_type",
    "natural_vector_size",
    "optimize_to_object",
    "release_symbol",
    "target_key",
    "type_suffix",
]
