"""LLVM IR of the copies between a batch and a lane buffer (``targets/batch_entries.py``): a group's
eight elements, each a contiguous block of n entries, into the buffer's rows of eight lanes (and
back), as 8 x 8 blocks transposed in vector registers (eight vector loads, 24 shuffles, eight vector
stores), where entry-by-entry loops make a scalar load and store per entry at runtime strides."""
from __future__ import annotations

#: lanes per group the helpers copy (``targets/lanes/modules.LANES``)
LANES = 8
_ITEM = {"double": 8, "float": 4}

#: the 8 x 8 transpose as shuffles: per stage, (a, b, mask) making output vector i from input vectors
#: a and b (mask indices 8-15 pick from b); stage 1 interleaves pairs of rows, stage 2 pairs of pairs,
#: stage 3 halves; row j of the result holds entry j of every input row
TRANSPOSE_STAGES = (
    [(0, 1, (0, 8, 2, 10, 4, 12, 6, 14)), (0, 1, (1, 9, 3, 11, 5, 13, 7, 15)),
     (2, 3, (0, 8, 2, 10, 4, 12, 6, 14)), (2, 3, (1, 9, 3, 11, 5, 13, 7, 15)),
     (4, 5, (0, 8, 2, 10, 4, 12, 6, 14)), (4, 5, (1, 9, 3, 11, 5, 13, 7, 15)),
     (6, 7, (0, 8, 2, 10, 4, 12, 6, 14)), (6, 7, (1, 9, 3, 11, 5, 13, 7, 15))],
    [(0, 2, (0, 1, 8, 9, 4, 5, 12, 13)), (1, 3, (0, 1, 8, 9, 4, 5, 12, 13)),
     (0, 2, (2, 3, 10, 11, 6, 7, 14, 15)), (1, 3, (2, 3, 10, 11, 6, 7, 14, 15)),
     (4, 6, (0, 1, 8, 9, 4, 5, 12, 13)), (5, 7, (0, 1, 8, 9, 4, 5, 12, 13)),
     (4, 6, (2, 3, 10, 11, 6, 7, 14, 15)), (5, 7, (2, 3, 10, 11, 6, 7, 14, 15))],
    [(0, 4, (0, 1, 2, 3, 8, 9, 10, 11)), (1, 5, (0, 1, 2, 3, 8, 9, 10, 11)),
     (2, 6, (0, 1, 2, 3, 8, 9, 10, 11)), (3, 7, (0, 1, 2, 3, 8, 9, 10, 11)),
     (0, 4, (4, 5, 6, 7, 12, 13, 14, 15)), (1, 5, (4, 5, 6, 7, 12, 13, 14, 15)),
     (2, 6, (4, 5, 6, 7, 12, 13, 14, 15)), (3, 7, (4, 5, 6, 7, 12, 13, 14, 15))],
)


def _transpose(t: str, rows: list, tag: str) -> tuple:
    """(lines, names) transposing the eight <8 x t> values ``rows``."""
    lines, current = [], rows
    for s, stage in enumerate(TRANSPOSE_STAGES):
        names = []
        for i, (a, b, mask) in enumerate(stage):
            name = f"%{tag}s{s}_{i}"
            indices = ", ".join(f"i32 {m}" for m in mask)
            lines.append(f"  {name} = shufflevector <8 x {t}> {current[a]}, <8 x {t}> {current[b]}, <8 x i32> <{indices}>")
            names.append(name)
        current = names
    return lines, current


def _lane_pointers(guard_last: bool) -> list:
    """%p0..%p7: each lane's element, min(first + k, count - 1) (the last group's spare lanes repeat
    its last element) when ``guard_last``, else first + k."""
    lines = ["  %last = sub i64 %count, 1"]
    for k in range(LANES):
        lines.append(f"  %e{k} = add i64 %first, {k}")
        index = f"%e{k}"
        if guard_last:
            lines += [f"  %lt{k} = icmp slt i64 %e{k}, %last", f"  %c{k} = select i1 %lt{k}, i64 %e{k}, i64 %last"]
            index = f"%c{k}"
        lines += [f"  %o{k} = mul i64 {index}, %stride", f"  %p{k} = getelementptr i8, ptr %src, i64 %o{k}"]
    return lines


def _buffer_rows(item: int) -> list:
    """%bq0..%bq7: the buffer's rows e .. e + 7 (eight lanes each), from the byte offset %bo of row e."""
    lines = []
    for j in range(LANES):
        lines += [f"  %bo{j} = add i64 %bo, {j * LANES * item}", f"  %bq{j} = getelementptr i8, ptr %buf, i64 %bo{j}"]
    return lines


def definition(t: str, gather: bool) -> str:
    """``void @rd_lanes_gather_<t>`` / ``@rd_lanes_scatter_<t>(ptr buf, ptr src, i64 stride, i64 first,
    i64 count, i64 n)``: buf[e * 8 + k] = src_k[e] (gather) or back for the lanes holding an element
    (first + k < count), e < n, for src_k = src + element(first + k) * stride, each element's n
    entries contiguous and the buffer's rows of eight lanes contiguous."""
    item, name = _ITEM[t], f"rd_lanes_{'gather' if gather else 'scatter'}_{t}"
    lines = [f"define internal void @{name}(ptr %buf, ptr %src, i64 %stride, i64 %first, i64 %count, i64 %n) {{",
             "entry:"]
    lines += _lane_pointers(guard_last=gather)
    lines += ["  %whole = add i64 %first, 8", "  %full = icmp sle i64 %whole, %count",
              "  %bulk = and i64 %n, -8",
              # a scatter of the last, partial group goes entry by entry (its spare lanes are not written)
              f"  %blocks = select i1 %full, i64 %bulk, i64 {'%bulk' if gather else '0'}",
              "  br label %head",
              "head:",
              "  %e = phi i64 [0, %entry], [%e8, %block]",
              "  %more = icmp slt i64 %e, %blocks",
              "  br i1 %more, label %block, label %tailstart",
              "block:",
              f"  %eo = mul i64 %e, {item}",
              f"  %bo = mul i64 %e, {LANES * item}"]
    if gather:
        rows = []
        for k in range(LANES):
            lines += [f"  %q{k} = getelementptr i8, ptr %p{k}, i64 %eo", f"  %r{k} = load <8 x {t}>, ptr %q{k}, align 1"]
            rows.append(f"%r{k}")
        body, cols = _transpose(t, rows, "g")
        lines += body + _buffer_rows(item)
        lines += [f"  store <8 x {t}> {cols[j]}, ptr %bq{j}, align 1" for j in range(LANES)]
    else:
        lines += _buffer_rows(item)
        lines += [f"  %w{j} = load <8 x {t}>, ptr %bq{j}, align 1" for j in range(LANES)]
        rows = [f"%w{j}" for j in range(LANES)]
        body, lanes = _transpose(t, rows, "s")
        lines += body
        for k in range(LANES):
            lines += [f"  %q{k} = getelementptr i8, ptr %p{k}, i64 %eo", f"  store <8 x {t}> {lanes[k]}, ptr %q{k}, align 1"]
    lines += ["  %e8 = add i64 %e, 8", "  br label %head",
              "tailstart:",
              "  br label %thead",
              "thead:",
              "  %te = phi i64 [%blocks, %tailstart], [%te1, %tdone]",
              "  %tmore = icmp slt i64 %te, %n",
              "  br i1 %tmore, label %tlane0, label %done"]
    for k in range(LANES):
        nxt = f"%tlane{k + 1}" if k + 1 < LANES else "%tdone"
        lines += [f"tlane{k}:",
                  f"  %to{k} = mul i64 %te, {item}",
                  f"  %tq{k} = getelementptr i8, ptr %p{k}, i64 %to{k}",
                  f"  %tb{k} = mul i64 %te, {LANES}",
                  f"  %tbk{k} = add i64 %tb{k}, {k}",
                  f"  %tbo{k} = mul i64 %tbk{k}, {item}",
                  f"  %tbq{k} = getelementptr i8, ptr %buf, i64 %tbo{k}"]
        if gather:
            lines += [f"  %tv{k} = load {t}, ptr %tq{k}, align 1", f"  store {t} %tv{k}, ptr %tbq{k}, align 1",
                      f"  br label {nxt}"]
        else:
            lines += [f"  %tin{k} = icmp slt i64 %e{k}, %count", f"  br i1 %tin{k}, label %tput{k}, label {nxt}",
                      f"tput{k}:",
                      f"  %tv{k} = load {t}, ptr %tbq{k}, align 1", f"  store {t} %tv{k}, ptr %tq{k}, align 1",
                      f"  br label {nxt}"]
    lines += ["tdone:", "  %te1 = add i64 %te, 1", "  br label %thead",
              "done:", "  ret void", "}"]
    return "\n".join(lines)


def helpers() -> dict:
    """The helpers, keyed as the prelude's ("name:type") with their C functions (none) and the
    intrinsics they call."""
    return {f"lanes_{kind}:{t}": (definition(t, kind == "gather"), ())
            for kind in ("gather", "scatter") for t in ("double", "float")}
