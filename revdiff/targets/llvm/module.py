"""A whole LLVM module of generated programs: a readable header, the declarations of the programs and
C functions it calls, the helpers it uses, its functions, and an entry that Python calls through
ctypes (``targets/llvm/entry_calls.py``): with the NumPy array objects themselves, whose data pointer,
shape and strides it reads (``targets/llvm/array_fields.py``), or, where their layout is unknown, with
every argument packed into one array of 64-bit words."""
from __future__ import annotations

from revdiff.targets.llvm import host, prelude
from revdiff.targets.llvm.emit import FunctionEmitter, ProgramSymbol, declaration
from revdiff.targets.llvm.types import MEMORY
from revdiff.targets.llvm.array_fields import ARRAY_FIELDS, ArrayFields


def entry_name(symbol: str) -> str:
    """The symbol of the packed-argument entry of program ``symbol``."""
    return f"{symbol}.entry"


def packed_entry(sig: ProgramSymbol) -> str:
    """``void @<symbol>.entry(ptr argv)``: unpack the words and call the program."""
    lines = [f'define void @"{entry_name(sig.symbol)}"(ptr %argv) nounwind {{', "entry:"]
    args, word = [], 0

    def load(kind: str) -> str:
        nonlocal word
        at, v = f"%w{word}", f"%v{word}"
        lines.append(f"  {at} = getelementptr i64, ptr %argv, i64 {word}")
        lines.append(f"  {v} = load {'ptr' if kind == 'ptr' else 'i64'}, ptr {at}")
        word += 1
        return v

    for t in sig.types:
        args.append(f"ptr {load('ptr')}")
        args += [f"i64 {load('i64')}" for _ in range(2 * t.ndim)]
    args.append(f"ptr {load('ptr')}")
    lines.append(f"  call void @{sig.symbol}({', '.join(args)})")
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def object_entry(sig: ProgramSymbol, fields: ArrayFields) -> str:
    """``void @<symbol>.entry(ptr a0, ..., ptr record)``, each argument a NumPy array object (a scalar
    in a one-element array): read each one's data pointer (and shape and strides) and call the program."""
    count = len(sig.types) + 1
    params = ", ".join(f"ptr %a{k}" for k in range(count))
    lines = [f'define void @"{entry_name(sig.symbol)}"({params}) nounwind {{', "entry:"]

    def field(k: int, offset: int, what: str) -> str:
        lines.append(f"  %{what}{k}.at = getelementptr i8, ptr %a{k}, i64 {offset}")
        lines.append(f"  %{what}{k} = load ptr, ptr %{what}{k}.at")
        return f"%{what}{k}"

    args = []
    for k, t in enumerate(list(sig.types) + [None]):
        args.append(f"ptr {field(k, fields.data, 'data')}")
        if t is None or not t.ndim:
            continue
        for what, offset in (("shape", fields.shape), ("strides", fields.strides)):
            base = field(k, offset, what)
            for axis in range(t.ndim):
                lines.append(f"  {base}.{axis}.at = getelementptr i64, ptr {base}, i64 {axis}")
                lines.append(f"  {base}.{axis} = load i64, ptr {base}.{axis}.at")
                args.append(f"i64 {base}.{axis}")
    lines.append(f"  call void @{sig.symbol}({', '.join(args)})")
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def entry(sig: ProgramSymbol) -> str:
    """The entry Python calls: reading the array objects where their layout is known, else unpacking words."""
    return packed_entry(sig) if ARRAY_FIELDS is None else object_entry(sig, ARRAY_FIELDS)


def module_text(emitters: list, signatures: dict, header: str, externals: list, entries: bool = True) -> str:
    """The module of ``emitters`` (FunctionEmitters, already emitted into ``functions``), calling the
    programs ``externals`` (ProgramSignatures) defined in other modules."""
    functions = [em.emitted for em in emitters]
    helpers, libm, blas, largest = set(), set(), set(), set()
    for em in emitters:
        helpers |= em.helpers
        libm |= em.libm
        blas |= em.blas
        largest |= em.largest
    definitions, calls = prelude.helper_definitions(helpers)
    routines, needs = host.declarations(blas, largest)
    libm |= calls | needs
    definitions += routines
    own = {em.symbol for em in emitters}
    parts = ["; " + line for line in header.splitlines()]
    parts += [declaration(sig) for sig in sorted(externals, key=lambda s: s.symbol) if sig.symbol not in own]
    parts += prelude.declarations(libm)
    # the programs first, then the helpers they call: code LLVM lays out after a program's symbol is
    # charged to that program by profilers that know only the exported symbols (benchmarks/profile.py)
    parts += functions
    parts += definitions
    if entries:
        parts += [entry(signatures[em.symbol]) for em in emitters]
    return "\n\n".join(parts) + "\n"


__all__ = ["FunctionEmitter", "MEMORY", "entry", "entry_name", "module_text", "object_entry", "packed_entry"]
