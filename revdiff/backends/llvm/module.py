"""A whole LLVM module of generated programs: a readable header, the declarations of the programs and
C functions it calls, the helpers it uses, its functions, and an entry that Python calls through
ctypes with every argument packed into one array of 64-bit words (``runtime/native.py``)."""
from __future__ import annotations

from revdiff.backends.llvm import host, prelude
from revdiff.backends.llvm.emit import FunctionEmitter, ProgramSignature, declaration
from revdiff.backends.llvm.types import MEMORY


def entry_name(symbol: str) -> str:
    """The symbol of the packed-argument entry of program ``symbol``."""
    return f"{symbol}.entry"


def packed_entry(sig: ProgramSignature) -> str:
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
    parts += definitions
    parts += functions
    if entries:
        parts += [packed_entry(signatures[em.symbol]) for em in emitters]
    return "\n\n".join(parts) + "\n"


__all__ = ["FunctionEmitter", "MEMORY", "entry_name", "module_text", "packed_entry"]
