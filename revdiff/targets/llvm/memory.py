"""Memory in the LLVM emitter: stack slots of variables, arrays as (data, shape, byte strides), the
views NumPy's basic indexing makes (integers fix axes, slices keep them, negative indices count from
the end), loads and stores in each dtype's memory type (narrow integers widened to i64, bools
stored as bytes), and the allocation of ancilla arrays (from the call's stack frame while
they fit, else from calloc)."""
from __future__ import annotations

from dataclasses import dataclass

from revdiff.targets.llvm.arithmetic import Arithmetic
from revdiff.targets.llvm.builder import EmitError, ident, vartype
from revdiff.targets.llvm.types import INT, ITEMSIZE, MEMORY, UNSIGNED, scalar
from revdiff.targets.llvm.values import Array, Scalar, float_constant
from revdiff.ir.checks import UNTRACKED, failure_code
from revdiff.ir.high import BinOp, Call, Const, Index, Name, Shape, Slice
from revdiff.ir.low import Zero
from revdiff.primitives.printer import expr_source


@dataclass
class Slot:
    """The stack slot of a scalar variable (its dtype's memory type)."""
    ref: str
    dtype: str


@dataclass
class ArraySlot:
    """Stack slots of an array variable's data pointer, shape and strides."""
    data: str
    shape: tuple
    strides: tuple
    dtype: str


#: The L1 data cache the layout of ancilla arrays assumes (Zen 4's, and many others': 32 KiB, 8 ways
#: of 4 KiB): addresses 4 KiB apart share a set, and a set holds 8 lines.
L1_WAY_BYTES = 4096
L1_BYTES = 32768
#: Row strides that are multiples of this many bytes (two cache lines) are candidates for padding:
#: below it rows spread over most sets, or the walk outgrows the cache whatever their layout.
PADDED_STRIDE_QUANTUM = 128

#: bytes of a call's stack frame its ancilla arrays may take: each is taken by alloca as it is allocated
#: (64-byte aligned, with its ``stagger``) while the call's total stays within this, then from calloc.
#: Nothing is given back before the call returns: an ancilla allocated again with a new shape (a fresh
#: ``zeros`` in a loop) leaves its old place behind, and later ones come from calloc. A column
#: reflection's two lane vectors at 64×32 float64 in lanes of 8 (4 KiB and 2 KiB, 6.2 KiB with their
#: staggers) fit. A call whose ancillas are larger takes no stack for them, and calls nest only as deep
#: as the program's calls (the language has no recursion).
FRAME_ANCILLA_BYTES = 8192


class Memory(Arithmetic):
    """Variables, arrays and views. Subclasses set ``slots`` (scalar name -> Slot), ``arrays`` (array
    name -> Array for parameters, ArraySlot for locals), ``owned_names`` (ancilla arrays: their last
    axis contiguous, outer axes possibly padded, ``padded_layout``), ``owned`` (those allocated so
    far, freed at exit), ``libm`` (the C functions and intrinsics used) and ``nonnegative`` (loop
    variables known not to go below zero)."""

    def padded_layout(self, dims: list, item: int) -> tuple:
        """(byte strides, bytes in all) of a new ancilla array of shape ``dims``: C order, except
        that an outer stride at which a walk down the axis would evict itself from the L1 cache gains
        one entry of the axis inside it. Rows S bytes apart (S a multiple of PADDED_STRIDE_QUANTUM)
        fall into L1_WAY_BYTES / g of the cache's sets, g = min(S & -S, L1_WAY_BYTES): more rows than
        those sets' ways hold (rows * g > L1_BYTES: 64 lane rows of 32 float64 columns, 2 KiB apart,
        not 32 rows of 1 KiB) evict each other on every column walk; one more entry per row spreads
        them over all sets. Each row stays contiguous."""
        stride = str(item)
        strides: list = []
        for k in range(len(dims) - 1, -1, -1):
            strides.insert(0, stride)
            outer = self._op(f"mul i64 {stride}, {dims[k]}")
            if k > 0:
                quantum = self._op(f"and i64 {outer}, {PADDED_STRIDE_QUANTUM - 1}")
                aligned = self._op(f"icmp eq i64 {quantum}, 0")
                lowest = self._op(f"and i64 {outer}, {self._op(f'sub i64 0, {outer}')}")
                small = self._op(f"icmp ult i64 {lowest}, {L1_WAY_BYTES}")
                apart = self._op(f"select i1 {small}, i64 {lowest}, i64 {L1_WAY_BYTES}")
                crowded = self._op(f"icmp sgt i64 {self._op(f'mul i64 {dims[k - 1]}, {apart}')}, {L1_BYTES}")
                pad = self._op(f"select i1 {self._op(f'and i1 {aligned}, {crowded}')}, i64 {stride}, i64 0")
                outer = self._op(f"add i64 {outer}, {pad}")
            stride = outer
        return strides, stride

    def store(self, target, v) -> None:
        if isinstance(target, Name) and target.id in self.arrays:
            slot = self.arrays[target.id]
            if not isinstance(v, Array) or not isinstance(slot, ArraySlot):
                raise EmitError(f"cannot assign {v} to the array {target.id}")
            self.out(f"store ptr {v.data}, ptr {slot.data}")
            for x, ref in zip(v.shape + v.strides, slot.shape + slot.strides):
                self.out(f"store i64 {x}, ptr {ref}")
            return
        if isinstance(v, Array):
            raise EmitError(f"an array assigned to the number {expr_source(target)}")
        if isinstance(target, Name):
            slot = self.slots[target.id]
            self._store_memory(v, slot.ref, slot.dtype)
            return
        address, dtype = self.element_address(target)
        self._store_memory(v, address, dtype)

    def _store_memory(self, v: Scalar, pointer: str, dtype: str) -> None:
        t = scalar(vartype(dtype))
        x = self.convert(v, t).ref
        memory = MEMORY[dtype]
        if dtype == "bool":
            x = self._op(f"zext i1 {x} to i8")
        elif t.kind == "int" and memory != "i64":
            x = self._op(f"trunc i64 {x} to {memory}")
        self.out(f"store {memory} {x}, ptr {pointer}, align 1")

    def _load_memory(self, pointer: str, dtype: str) -> Scalar:
        memory = MEMORY[dtype]
        x = self._op(f"load {memory}, ptr {pointer}, align 1")
        t = scalar(vartype(dtype))
        if dtype == "bool":
            x = self._op(f"icmp ne i8 {x}, 0")
        elif t.kind == "int" and memory != "i64":
            x = self._op(f"{'zext' if dtype in UNSIGNED else 'sext'} {memory} {x} to i64")
        return Scalar(x, t)

    # ---------------------------------------------------------------- arrays

    def array(self, name: str) -> Array:
        a = self.arrays[name]
        if isinstance(a, Array):
            return a
        data = self._op(f"load ptr, ptr {a.data}")
        shape = tuple(self._op(f"load i64, ptr {s}") for s in a.shape)
        strides = tuple(self._op(f"load i64, ptr {s}") for s in a.strides)
        if name in self.owned_names:  # an ancilla: C order, its last stride the itemsize
            strides = strides[:-1] + (str(ITEMSIZE[a.dtype]),)
            data = self._op(f"getelementptr i8, ptr {data}, i64 {self.stagger(name)}")
        return Array(data, shape, strides, a.dtype)

    def _index(self, e, extent: str) -> str:
        """An integer index as an offset from 0: a negative one counts from the end, as in Python."""
        i = self.convert(self.expr(e), INT).ref
        if self._never_negative(e):
            return i
        wrapped = self._op(f"add i64 {i}, {extent}")
        return self._op(f"select i1 {self._op(f'icmp slt i64 {i}, 0')}, i64 {wrapped}, i64 {i}")

    def _never_negative(self, e) -> bool:
        """Whether integer expression ``e`` is known not to be negative (an index that needs no
        wrap-around): constants, shapes, loop variables counting up from such a start, and their
        sums, products, floor quotients, minima and maxima."""
        if isinstance(e, Const):
            return not isinstance(e.value, bool) and isinstance(e.value, int) and e.value >= 0
        if isinstance(e, Name):
            return e.id in self.nonnegative
        if isinstance(e, Shape):
            return True
        if isinstance(e, BinOp) and e.op in ("+", "*", "//"):
            return self._never_negative(e.left) and self._never_negative(e.right)
        if isinstance(e, Call) and e.fn in ("min", "max"):
            return all(self._never_negative(a) for a in e.args)
        return False

    def element_address(self, e: Index) -> tuple:
        a = self.array(e.base)
        if len(e.indices) != a.ndim or any(isinstance(i, Slice) for i in e.indices):
            raise EmitError(f"{expr_source(e)} is not an element")
        offset = None
        for i, extent, stride in zip(e.indices, a.shape, a.strides):
            term = self._op(f"mul i64 {self._index(i, extent)}, {stride}")
            offset = term if offset is None else self._op(f"add i64 {offset}, {term}")
        return self._op(f"getelementptr i8, ptr {a.data}, i64 {offset}"), a.dtype

    def view(self, e: Index) -> Array:
        """The view ``e`` (integers fix axes, slices keep them), as NumPy's basic indexing makes it."""
        a = self.array(e.base)
        if len(e.indices) > a.ndim:
            raise EmitError(f"{expr_source(e)} has more indices than {e.base} has axes")
        data, shape, strides = a.data, [], []
        offset = None
        indices = tuple(e.indices) + (Slice(),) * (a.ndim - len(e.indices))
        for i, extent, stride in zip(indices, a.shape, a.strides):
            if not isinstance(i, Slice):
                term = self._op(f"mul i64 {self._index(i, extent)}, {stride}")
            else:
                start, length, step = self._slice(i, extent)
                term = self._op(f"mul i64 {start}, {stride}") if start != "0" else None
                shape.append(length)
                strides.append(stride if step == 1 else self._op(f"mul i64 {stride}, {step}"))
            if term is not None:
                offset = term if offset is None else self._op(f"add i64 {offset}, {term}")
        if offset is not None:
            data = self._op(f"getelementptr i8, ptr {data}, i64 {offset}")
        return Array(data, tuple(shape), tuple(strides), a.dtype)

    def _slice(self, s: Slice, n: str) -> tuple:
        """(start, length, step) of slice ``s`` of an axis of length ``n``, clamped as Python's
        slice.indices does, for a constant step."""
        step = 1 if s.step is None else s.step.value if isinstance(s.step, Const) else None
        if step is None or step == 0:
            raise EmitError(f"a slice step must be a nonzero constant, not {expr_source(s.step)}")

        def bound(b, default: str, low: str, high: str) -> str:
            if b is None:
                return default
            x = self.convert(self.expr(b), INT).ref
            if isinstance(b, Const) and b.value >= 0:
                return self._op(f"select i1 {self._op(f'icmp sgt i64 {x}, {high}')}, i64 {high}, i64 {x}")
            wrapped = self._op(f"add i64 {x}, {n}")
            x = self._op(f"select i1 {self._op(f'icmp slt i64 {x}, 0')}, i64 {wrapped}, i64 {x}")
            x = self._op(f"select i1 {self._op(f'icmp slt i64 {x}, {low}')}, i64 {low}, i64 {x}")
            return self._op(f"select i1 {self._op(f'icmp sgt i64 {x}, {high}')}, i64 {high}, i64 {x}")

        if step > 0:
            start = bound(s.lower, "0", "0", n)
            stop = bound(s.upper, n, "0", n)
            span = self._op(f"sub i64 {stop}, {start}")
            if step != 1:
                span = self._op(f"sdiv i64 {self._op(f'add i64 {span}, {step - 1}')}, {step}")
        else:
            last = self._op(f"sub i64 {n}, 1")
            start = bound(s.lower, last, "-1", last)
            stop = bound(s.upper, "-1", "-1", last)
            distance = self._op(f"sub i64 {start}, {stop}")
            span = self._op(f"sdiv i64 {self._op(f'add i64 {distance}, {-step - 1}')}, {-step}")
        length = self._op(f"select i1 {self._op(f'icmp slt i64 {span}, 0')}, i64 0, i64 {span}")
        return start, length, step

    # ---------------------------------------------------------------- ancilla arrays

    def ancilla_frame(self) -> list:
        """The entry block's lines that set up the count of bytes the call's ancillas took from its
        frame (``FRAME_ANCILLA_BYTES``) and each ancilla's flag saying that calloc gave its data."""
        if not self.owned_names:
            return []
        lines = ["  %ancilla.frame.used = alloca i64", "  store i64 0, ptr %ancilla.frame.used"]
        for name in sorted(self.owned_names):
            lines += [f"  {self._heap_flag(name)} = alloca i1", f"  store i1 false, ptr {self._heap_flag(name)}"]
        return lines

    def zero(self, s: Zero) -> None:
        """Allocate ancilla ``s.name`` as zeros of ``s.shape``: a scalar set to 0; an array cleared in
        place where it already holds one of this shape (``s.reuse``), else taken from the call's
        stack or from calloc, its size refused (the failure ``s.alloc``) if negative or beyond 2^62
        bytes, or if calloc fails."""
        if s.shape is None:
            t = vartype(s.dtype)
            self.store(Name(s.name), self.convert(Scalar("0", INT), scalar(t)))
            return
        slot = self.arrays[s.name]
        if s.name not in self.owned:
            self.owned.append(s.name)
        dims = [self.convert(self.expr(x), INT).ref for x in s.shape]
        item = ITEMSIZE[s.dtype]
        allocate, done = self._new_label("alloc"), self._new_label("allocated")
        if s.reuse:  # the array it holds has this shape: clear it
            old = self._op(f"load ptr, ptr {slot.data}")
            same = self._op(f"icmp ne ptr {old}, null")
            for d, ref in zip(dims, slot.shape):
                have = self._op(f"load i64, ptr {ref}")
                same = self._op(f"and i1 {same}, {self._op(f'icmp eq i64 {have}, {d}')}")
            clear = self._new_label("clear")
            self._cond_br(same, clear, allocate)
            self._label(clear)
            nbytes = self.padded_layout(dims, item)[1]
            self._clear(self._op(f"getelementptr i8, ptr {old}, i64 {self.stagger(s.name)}"), nbytes)
            self._br(done)
        self._br(allocate)
        self._label(allocate)
        # entries in float64 (no wrap-around) for the size check and the failure's report
        entries = "1.0"
        negative = "false"
        for d in dims:
            entries = self._op(f"fmul double {entries}, {self._op(f'sitofp i64 {d} to double')}")
            negative = self._op(f"or i1 {negative}, {self._op(f'icmp slt i64 {d}, 0')}")
        too_big = self._op(f"fcmp ogt double {entries}, {float_constant(2.0 ** 62 / item, 'double')}")
        refuse = self._op(f"or i1 {negative}, {too_big}")
        fail, go = self._new_label("nomem"), self._new_label("calloc")
        self._cond_br(refuse, fail, go)
        self._label(go)
        self.out(f"call void @free(ptr {self._data_to_free(s.name)})")
        self.out(f"store ptr null, ptr {slot.data}")
        strides, size = self.padded_layout(dims, item)
        count = self._op(f"select i1 {self._op(f'icmp eq i64 {size}, 0')}, i64 {item}, i64 {size}")
        nbytes = self._op(f"add i64 {count}, {self.stagger(s.name)}")
        # from the frame (alloca, 64-byte aligned) while the call's total fits, else from the heap
        used = self._op("load i64, ptr %ancilla.frame.used")
        padded = self._op(f"and i64 {self._op(f'add i64 {nbytes}, 63')}, -64")
        end = self._op(f"add i64 {used}, {padded}")
        in_frame, on_heap, got = self._new_label("frame"), self._new_label("heap"), self._new_label("got")
        self._cond_br(self._op(f"icmp ule i64 {end}, {FRAME_ANCILLA_BYTES}"), in_frame, on_heap)
        self._label(in_frame)
        self.out("store i64 " + end + ", ptr %ancilla.frame.used")
        framed = self._op(f"alloca i8, i64 {padded}, align 64")
        self._clear(framed, nbytes)
        self.out(f"store ptr {framed}, ptr {slot.data}")
        self.out(f"store i1 false, ptr {self._heap_flag(s.name)}")
        self._br(got)
        self._label(on_heap)
        data = self._op(f"call ptr @calloc(i64 {nbytes}, i64 1)")
        self.libm |= {("calloc", "ptr"), ("free", "ptr")}
        self.out(f"store ptr {data}, ptr {slot.data}")
        self.out(f"store i1 true, ptr {self._heap_flag(s.name)}")
        self._cond_br(self._op(f"icmp eq ptr {data}, null"), fail, got)
        self._label(fail)
        code = s.alloc if s.alloc is not None else failure_code(0, UNTRACKED)
        at = self._op("getelementptr double, ptr %err, i64 0")
        self.out(f"store double {float_constant(float(code), 'double')}, ptr {at}")
        at = self._op("getelementptr double, ptr %err, i64 2")
        self.out(f"store double {entries}, ptr {at}")
        self._br("exit")
        self._label(got)
        for d, ref in zip(dims, slot.shape):
            self.out(f"store i64 {d}, ptr {ref}")
        for st, ref in zip(strides, slot.strides):
            self.out(f"store i64 {st}, ptr {ref}")
        self._br(done)
        self._label(done)

    def _clear(self, pointer: str, nbytes: str) -> None:
        """Zero ``nbytes`` bytes from ``pointer``."""
        self.libm.add(("memset", "ptr"))
        self.out(f"call void @llvm.memset.p0.i64(ptr {pointer}, i8 0, i64 {nbytes}, i1 false)")

    def _heap_flag(self, name: str) -> str:
        """The stack slot of the flag saying that ancilla ``name``'s data came from calloc."""
        return f"%{ident(name, '.on.heap')}"

    def _data_to_free(self, name: str) -> str:
        """Ancilla ``name``'s data pointer where calloc gave it, else null: what to free."""
        data = self._op(f"load ptr, ptr {self.arrays[name].data}")
        return self._op(f"select i1 {self._op(f'load i1, ptr {self._heap_flag(name)}')}, ptr {data}, ptr null")

    def stagger(self, name: str) -> int:
        """The offset of ancilla array ``name``'s data in its allocation: ancillas of one program that
        calloc gives (page-aligned when large) start at different offsets modulo 4096, so that the CPU
        does not take accesses to the same index of two of them for the same address (4K aliasing).
        On the stack it adds to the place where the ancilla lands, which the allocations
        before it decide."""
        return 64 * (1 + sorted(self.owned_names).index(name) % 31)
