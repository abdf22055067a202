"""A batched entry calls its program through the program's address instead of linking it in.

Numba links the whole library of a function a compiled function calls (the program, and every
program and routine that one calls) into the caller's, then optimises and emits it again: a
batched entry, a loop around one call, took as long to compile as its program (2 to 9 s). In
generated code ``_call_at(_program_at, program, args...)`` is typed as the call
``program(args...)`` (which compiles ``program`` for those types) and emitted as an indirect call
through the address ``_program_at``, with Numba's own calling convention (status, exception and
return value, exactly as a direct call), so that the entry's library holds its loop alone.

The caller passes the address of the overload the entry's typing chose (``program_address``): the
entry's module says how each of the program's arguments comes from the entry's (``a[_b]``, a lane
buffer, ...), and Numba's typing of those expressions gives the program's types, also where the
entry came from Numba's disk cache and its program did not. Where the entry was compiled in this
process they are checked against the types its ``_call_at`` was typed with.
"""
from __future__ import annotations

import operator
import threading
from typing import Any

import numpy as np
from llvmlite import ir as llvm
from numba._dispatcher import compute_fingerprint
from numba.core import cgutils, types
from numba.core.callconv import excinfo_t
from numba.core.registry import cpu_target
from numba.extending import intrinsic

from revdiff.ir.entries import AS_IS, CHUNK_RECORD, ELEMENT, ELEMENT_SLICE, LANE_BUFFER, SCALAR_LANE_BUFFER

_LOCK = threading.Lock()
_TYPED: dict = {}  # program dispatcher -> the argument types ``_call_at`` was typed with in this process


@intrinsic
def _numba_call_at(typingctx, address, program, *args):
    """``program(*args)`` through the compiled overload at ``address`` (an int64)."""
    argtypes = tuple(args[0].types if len(args) == 1 and isinstance(args[0], types.StarArgTuple) else args)
    if not isinstance(program, types.Dispatcher) or not isinstance(address, types.Integer):
        return None
    dispatcher = program.dispatcher
    dispatcher.compile(argtypes)
    _TYPED.setdefault(dispatcher, set()).add(argtypes)
    restype = dispatcher.overloads[argtypes].signature.return_type

    def codegen(context, builder, signature, llargs):
        conv = context.call_conv
        callee = builder.inttoptr(llargs[0], conv.get_function_type(restype, argtypes).as_pointer())
        result_type = conv.get_return_type(restype).pointee
        result = cgutils.alloca_once(builder, result_type)
        builder.store(cgutils.get_null_value(result_type), result)
        excinfo = cgutils.alloca_once(builder, llvm.PointerType(excinfo_t), name="excinfo")
        values = cgutils.unpack_tuple(builder, llargs[2])
        code = builder.call(callee, [result, excinfo] + list(conv._get_arg_packer(argtypes).as_arguments(builder, values)))
        status = conv._get_return_status(builder, code, builder.load(excinfo))
        with cgutils.if_unlikely(builder, status.is_error):  # an exception: raised here, or caught by ``try``
            conv.return_status_propagate(builder, status)
        return context.get_returned_value(builder, restype, builder.load(result))

    return restype(address, program, types.StarArgTuple(argtypes)), codegen


def _python_call_at(address: int, program, *args: Any):
    """``_call_at`` where generated code runs as plain Python: the call itself."""
    return program(*args)


def call_at(backend: str):
    """What generated entries call ``_call_at`` by, for ``backend``."""
    return _numba_call_at if backend == "numba" else _python_call_at


def known_address(entry, args: tuple) -> int | None:
    """The address ``program_address`` found for arguments of these types, or None (not yet asked)."""
    if not hasattr(entry, "overloads"):
        return 0
    return entry.__dict__.get("revdiff_program_addresses", {}).get(_kinds(args))


def program_address(entry, args: tuple) -> int:
    """The address of the program that compiled ``entry``, called with ``args``, runs through
    ``_call_at`` (0 where ``entry`` is plain Python). Compiles the entry (or loads it from Numba's
    cache) and the program, so it runs where a first call may compile (``calls.interruptible``)."""
    if not hasattr(entry, "overloads"):
        return 0
    argtypes, kinds = tuple(entry.typeof_pyval(a) for a in args), _kinds(args)
    with _LOCK:
        addresses = entry.__dict__.setdefault("revdiff_program_addresses", {})
        if kinds not in addresses:
            entry.compile(argtypes)
            program, program_types = _called_program(entry, argtypes)
            program.compile(program_types)
            result = program.overloads[program_types]
            address = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
            if not address:
                raise RuntimeError(f"revdiff: Numba has no code for {program.py_func.__qualname__}{program_types}")
            addresses[kinds] = address
        return addresses[kinds]


def _kinds(args: tuple) -> tuple:
    """What decides the Numba types of ``args``, cheaply (Numba's own fingerprint of a value, which
    leaves out an array's alignment): the key of an entry's addresses, looked up on every call."""
    return tuple((compute_fingerprint(a), a.flags.aligned) if isinstance(a, np.ndarray) else compute_fingerprint(a)
                 for a in args)


def _called_program(entry, argtypes: tuple) -> tuple:
    """(dispatcher, argument types) of the program ``entry`` (compiled for ``argtypes``) calls: the
    types of the arguments its module describes (``_PROGRAM_ARGUMENTS``), by Numba's own typing of
    the expressions that make them. Where the entry was compiled in this process, they are checked
    against the types its ``_call_at`` was typed with."""
    function = entry.py_func
    scope = function.__globals__
    program = scope[scope["_PROGRAM"]]
    by_name = dict(zip(function.__code__.co_varnames[:function.__code__.co_argcount], argtypes))
    program_types = tuple(_argument_type(by_name[name], how) for name, how in scope["_PROGRAM_ARGUMENTS"])
    compiled_here = getattr(entry, "_cache_misses", {}).get(argtypes)  # Numba counts a compile as a cache miss
    if compiled_here and program_types not in _TYPED.get(program, ()):
        raise RuntimeError(f"revdiff: {function.__qualname__} was typed to call {program.py_func.__qualname__} with "
                           f"{sorted(_TYPED.get(program, ()), key=str)}, not {program_types}")
    return program, program_types


def _argument_type(entry_type, how: str):
    """The Numba type of a program argument made from an entry argument of type ``entry_type`` as
    ``how`` says (``ir/entries.py``)."""
    if how == AS_IS:
        return entry_type
    if how == ELEMENT:
        return _getitem(entry_type, types.intp)
    if how == ELEMENT_SLICE:
        return _getitem(entry_type, types.slice2_type)
    if how == CHUNK_RECORD:  # _errors[_n:][_c]
        return _getitem(_getitem(entry_type, types.slice2_type), types.intp)
    if how in (LANE_BUFFER, SCALAR_LANE_BUFFER):  # np.empty(shape, a.dtype): C order
        ndim = entry_type.ndim if how == LANE_BUFFER else 2
        return _typed(np.empty, types.UniTuple(types.intp, ndim), types.DType(entry_type.dtype))
    raise ValueError(f"unknown program argument {how!r}")


def _getitem(array_type, index_type):
    return _typed(operator.getitem, array_type, index_type)


def _typed(function, *argtypes):
    return cpu_target.typing_context.resolve_function_type(function, argtypes, {}).return_type
