"""A prefetch hint for compiled kernels: ``llvm.prefetch`` as a numba intrinsic.

The sampling kernels' second pass (:mod:`gnnscale.samplers.cpu_kernels`) asks the CPU to load the
edge it will read some slots ahead, and the engine's block aggregation
(``gnnscale.nn.sparse_ops._spmm``) the source row of an edge some edges ahead, so that more of
their cache misses are in flight. numba's
on-disk cache keys a kernel on its own file: after changing this one, delete the cache
(``__pycache__/*.nbi``, ``*.nbc``) so the kernels are compiled again.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, i, byte_offset):
    """Hint the CPU to load the cache line at ``byte_offset`` bytes into ``arr[i]`` (its first
    axis' entry ``i``: an element of a 1-D array, a row of a 2-D one). No effect on results:
    a prefetch never faults."""
    sig = types.void(arr, i, byte_offset)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        stride = cgutils.unpack_tuple(builder, ary.strides, signature.args[0].ndim)[0]  # bytes per arr[i]
        off = builder.add(builder.mul(args[1], stride), args[2])
        ptr = builder.gep(builder.bitcast(ary.data, cgutils.voidptr_t), [off])
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
                                             "llvm.prefetch.p0")
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])  # read, keep in every cache level, data
        return context.get_dummy_value()

    return sig, codegen
