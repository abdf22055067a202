"""Calls in the LLVM emitter: of other generated programs (scalar arguments through stack slots,
copied back into the targets the IR names; a failure in the callee leaves the caller, unless the
call has an error record of its own, as a batched entry's elements do), and of the host routines
(``host.py``: BLAS where it applies, the largest magnitude of a view), each with its loops as the
fallback."""
from __future__ import annotations

from revdiff.targets.llvm.builder import EmitError, vartype
from revdiff.targets.llvm import lane_copy
from revdiff.targets.llvm.host import BLAS_ROUTINES
from revdiff.targets.llvm.memory import Memory
from revdiff.targets.llvm.types import FLOAT64, INT, ITEMSIZE, MEMORY
from revdiff.targets.llvm.values import Array, Scalar
from revdiff.ir.high import Const, Index, Name, Slice
from revdiff.ir.low import HostCall, Invoke
from revdiff.primitives.printer import expr_source


class Calls(Memory):
    """Invoke and HostCall statements. Subclasses set ``callees`` (name -> ProgramSymbol), ``blas``
    and ``largest`` (the dtypes of the host routines used) and provide ``stmts`` (a fallback's loops)."""

    def invoke(self, s: Invoke) -> None:
        sig = self.callees[s.fn]
        args, temps = [], {}
        for k, (a, t) in enumerate(zip(s.args, sig.types)):
            v = self.expr(a)
            if t.ndim:
                if not isinstance(v, Array) or v.ndim != t.ndim:
                    raise EmitError(f"argument {expr_source(a)} of {s.fn} is not an array of rank {t.ndim}")
                args += [f"ptr {v.data}"] + [f"i64 {x}" for x in v.shape + v.strides]
            else:
                temp = f"%arg{self.counter}.{k}"
                self.counter += 1
                self.entry_lines.append(f"  {temp} = alloca {MEMORY[t.dtype]}")
                self._store_memory(v, temp, t.dtype)
                temps[k] = (temp, t)
                args.append(f"ptr {temp}")
        if s.record is None:
            record = "%err"
        else:
            target = self.expr(s.record)
            if not isinstance(target, Array) or target.dtype != "float64":
                raise EmitError(f"the error record {expr_source(s.record)} is not a float64 array")
            record = target.data
        self.out(f"call void @{sig.symbol}({', '.join(args + [f'ptr {record}'])})")
        if s.record is None:
            self._leave_on_failure()
        for k, r in enumerate(s.results):
            if r is None or k not in temps:
                continue
            temp, t = temps[k]
            self.store(r, self._load_memory(temp, t.dtype))

    def _leave_on_failure(self) -> None:
        code = self._op("load double, ptr %err")
        failed = self._op(f"fcmp une double {code}, 0.0")
        cont = self._new_label("called")
        self._cond_br(failed, "exit", cont)
        self._label(cont)

    def host_call(self, s: HostCall) -> None:
        """A host routine (``targets/llvm/host.py``) where it applies, else its loops: BLAS where
        ``when`` holds and the routine accepts the views, the largest magnitude of a vector or matrix."""
        if s.routine == "largest_magnitude":
            view = self.expr(s.args[1])
            if isinstance(view, Array) and view.ndim in (1, 2) and view.dtype in ITEMSIZE and \
                    vartype(view.dtype).kind in ("float", "complex"):
                self.largest.add(view.dtype)
                scale = self.convert(self.expr(s.args[0]), FLOAT64).ref
                fn = f"@rd_largest_{view.dtype}"
                if view.ndim == 1:
                    result = self._op(f"call double {fn}(double {scale}, ptr {view.data}, i64 {view.shape[0]}, "
                                      f"i64 {view.strides[0]})")
                else:
                    result = self._rows_largest(fn, scale, view)
                self.store(Name(s.result), Scalar(result, FLOAT64))
                return
            self.stmts(s.fallback)
            return
        if s.routine == "lane_copy":
            self._lane_copy(s)
            return
        if s.routine not in BLAS_ROUTINES:
            self.stmts(s.fallback)
            return
        views = [self.expr(a) for a in s.args if not isinstance(a, Const) and self._is_view(a)]
        dtypes = {v.dtype for v in views if isinstance(v, Array)}
        if len(dtypes) != 1 or not dtypes <= {"float32", "float64"} or not all(isinstance(v, Array) for v in views):
            self.stmts(s.fallback)
            return
        dtype = dtypes.pop()
        self.blas.add(dtype)
        flags = [self.truth(self.expr(a)) for a in s.args[len(views):-1]]
        sign = self.expr(s.args[-1])
        positive = self.compare(">", sign, Scalar("0", INT)).ref
        pieces = [f"ptr {v.data}" + "".join(f", i64 {x}" for x in v.shape + v.strides) for v in views]
        call, loops, done = self._new_label("blas"), self._new_label("loops"), self._new_label("hosted")
        if s.when is not None:
            self._cond_br(self.truth(self.expr(s.when)), call, loops)
        self._label(call)
        letter = "d" if dtype == "float64" else "s"
        ok = self._op(f"call i1 @rd_{s.routine}_{letter}({', '.join(pieces + [f'i1 {f}' for f in flags])}, i1 {positive})")
        self._cond_br(ok, done, loops)
        self._label(loops)
        self.stmts(s.fallback)
        self._br(done)
        self._label(done)

    def _lane_copy(self, s: HostCall) -> None:
        """A group's elements into a lane buffer or back (``targets/batch_entries.py``): args (buffer,
        batch array, first element, batch size, 1 to gather or 0); by 8 x 8 transposes
        (``lane_copy.py``) where each element's entries are contiguous: in one call where the buffer
        is too, else row by row where its rows are (padded rows, ``Memory.padded_layout``), else
        by the loops."""
        buf, src = self.expr(s.args[0]), self.expr(s.args[1])
        if not (isinstance(buf, Array) and isinstance(src, Array) and buf.dtype == src.dtype
                and buf.dtype in ("float64", "float32") and buf.ndim == src.ndim >= 2):
            self.stmts(s.fallback)
            return
        item = ITEMSIZE[buf.dtype]
        element_ok, element_bytes = self._c_ordered(src, 1, item)
        rows_ok, row_bytes = self._c_ordered(buf, buf.ndim - 2, item)
        buffer_ok, _ = self._c_ordered(buf, 0, item)
        lanes_ok = self._op(f"icmp eq i64 {buf.shape[-1]}, {lane_copy.LANES}")
        copyable = self._op(f"and i1 {self._op(f'and i1 {element_ok}, {rows_ok}')}, {lanes_ok}")
        t = "double" if buf.dtype == "float64" else "float"
        kind = "gather" if s.args[4].value else "scatter"
        self.helpers.add(f"lanes_{kind}:{t}")
        first_element = self.convert(self.expr(s.args[2]), INT).ref
        count = self.convert(self.expr(s.args[3]), INT).ref
        transposes, whole = self._new_label("lanetransposes"), self._new_label("lanecopy")
        rows = self._new_label("lanerows")
        loops, done = self._new_label("laneloops"), self._new_label("lanecopied")
        self._cond_br(copyable, transposes, loops)
        self._label(transposes)
        self._cond_br(buffer_ok, whole, rows)
        self._label(rows)
        self._lane_copy_rows(buf, src, kind, t, first_element, count, row_bytes, done)
        self._label(whole)
        entries = self._op(f"sdiv i64 {element_bytes}, {item}")
        self.out(f"call void @rd_lanes_{kind}_{t}(ptr {buf.data}, ptr {src.data}, i64 {src.strides[0]}, "
                 f"i64 {first_element}, i64 {count}, i64 {entries})")
        self._br(done)
        self._label(loops)
        self.stmts(s.fallback)
        self._br(done)
        self._label(done)

    def _lane_copy_rows(self, buf: Array, src: Array, kind: str, t: str, first: str, count: str,
                        row_bytes: str, done: str) -> None:
        """A loop copying a padded buffer's rows (its last element axis and the lanes, ``row_bytes``
        long) one call each, the element's matching entries contiguous; it ends at ``done``."""
        head, body = self._new_label("rowhead"), self._new_label("row")
        counter = f"%lanerow{self.counter}"
        self.counter += 1
        self.entry_lines.append(f"  {counter} = alloca i64")
        self.out(f"store i64 0, ptr {counter}")
        rows = "1"
        for axis in range(buf.ndim - 2):
            rows = self._op(f"mul i64 {rows}, {buf.shape[axis]}")
        self._br(head)
        self._label(head)
        r = self._op(f"load i64, ptr {counter}")
        self._cond_br(self._op(f"icmp slt i64 {r}, {rows}"), body, done)
        self._label(body)
        offset, rest = "0", r  # the buffer's byte offset of row r: its outer indices times their strides
        for axis in range(buf.ndim - 3, -1, -1):
            index = self._op(f"srem i64 {rest}, {buf.shape[axis]}")
            rest = self._op(f"sdiv i64 {rest}, {buf.shape[axis]}")
            offset = self._op(f"add i64 {offset}, {self._op(f'mul i64 {index}, {buf.strides[axis]}')}")
        entries = self._op(f"sdiv i64 {row_bytes}, {lane_copy.LANES * ITEMSIZE[buf.dtype]}")
        row_buf = self._op(f"getelementptr i8, ptr {buf.data}, i64 {offset}")
        skip = self._op(f"mul i64 {r}, {self._op(f'sdiv i64 {row_bytes}, {lane_copy.LANES}')}")
        row_src = self._op(f"getelementptr i8, ptr {src.data}, i64 {skip}")
        self.out(f"call void @rd_lanes_{kind}_{t}(ptr {row_buf}, ptr {row_src}, i64 {src.strides[0]}, "
                 f"i64 {first}, i64 {count}, i64 {entries})")
        self.out(f"store i64 {self._op(f'add i64 {r}, 1')}, ptr {counter}")
        self._br(head)

    def _c_ordered(self, view: Array, first: int, item: int) -> tuple:
        """(i1: the axes of ``view`` from ``first`` on are contiguous in C order, each stride the size
        of the axes after it; i64: their size in bytes)."""
        ok, size = "true", str(item)
        for axis in range(view.ndim - 1, first - 1, -1):
            ok = self._op(f"and i1 {ok}, {self._op(f'icmp eq i64 {view.strides[axis]}, {size}')}")
            size = self._op(f"mul i64 {size}, {view.shape[axis]}")
        return ok, size

    def _is_view(self, e) -> bool:
        return (isinstance(e, Name) and e.id in self.arrays) or (isinstance(e, Index) and (
            any(isinstance(i, Slice) for i in e.indices) or len(e.indices) < self.types[e.base].ndim))

    def _rows_largest(self, fn: str, scale: str, view: Array) -> str:
        """max(scale, |x|) over a matrix view, row by row."""
        acc = f"%largest{self.counter}"
        row = f"%row{self.counter}"
        self.counter += 1
        self.entry_lines += [f"  {acc} = alloca double", f"  {row} = alloca i64"]
        self.out(f"store double {scale}, ptr {acc}")
        self.out(f"store i64 0, ptr {row}")
        head, body, done = self._new_label("rows"), self._new_label("row"), self._new_label("rowsdone")
        self._br(head)
        self._label(head)
        i = self._op(f"load i64, ptr {row}")
        self._cond_br(self._op(f"icmp slt i64 {i}, {view.shape[0]}"), body, done)
        self._label(body)
        at = self._op(f"getelementptr i8, ptr {view.data}, i64 {self._op(f'mul i64 {i}, {view.strides[0]}')}")
        so_far = self._op(f"load double, ptr {acc}")
        value = self._op(f"call double {fn}(double {so_far}, ptr {at}, i64 {view.shape[1]}, i64 {view.strides[1]})")
        self.out(f"store double {value}, ptr {acc}")
        self.out(f"store i64 {self._op(f'add i64 {i}, 1')}, ptr {row}")
        self._br(head)
        self._label(done)
        return self._op(f"load double, ptr {acc}")
