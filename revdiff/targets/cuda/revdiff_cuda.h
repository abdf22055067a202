// revdiff CUDA prelude: strided arrays, complex numbers, Python-semantics helpers, runtime checks
// and the per-thread scratch stack of ancillas. Included at the top of every generated kernel
// source; compiles with NVRTC, and as host C++ when RD_HOST is defined (see revdiff_host.h).
#pragma once
#ifdef RD_HOST
#define RD_FN inline
#define RD_COLD inline
#else
#define RD_FN __device__ __forceinline__
#define RD_COLD __device__ __noinline__
#endif

typedef long long rd_int;

// ---------------------------------------------------------------- complex numbers

template <typename T>
struct rd_complex {
    T re, im;
    RD_FN rd_complex() : re(0), im(0) {}
    RD_FN rd_complex(T r) : re(r), im(0) {}
    RD_FN rd_complex(T r, T i) : re(r), im(i) {}
    template <typename U> RD_FN explicit rd_complex(const rd_complex<U>& z) : re((T)z.re), im((T)z.im) {}
    RD_FN rd_complex& operator+=(const rd_complex& b) { re += b.re; im += b.im; return *this; }
    RD_FN rd_complex& operator-=(const rd_complex& b) { re -= b.re; im -= b.im; return *this; }
    RD_FN rd_complex& operator*=(const rd_complex& b) { *this = *this * b; return *this; }
    RD_FN rd_complex& operator/=(const rd_complex& b) { *this = *this / b; return *this; }
    friend RD_FN rd_complex operator+(rd_complex a, rd_complex b) { return rd_complex(a.re + b.re, a.im + b.im); }
    friend RD_FN rd_complex operator-(rd_complex a, rd_complex b) { return rd_complex(a.re - b.re, a.im - b.im); }
    friend RD_FN rd_complex operator*(rd_complex a, rd_complex b) {
        return rd_complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
    }
    friend RD_FN rd_complex operator/(rd_complex a, rd_complex b) {  // Smith's algorithm, as NumPy
        if (fabs(b.re) >= fabs(b.im)) {
            if (b.re == 0 && b.im == 0) return rd_complex(a.re / b.re, a.im / b.re);
            T r = b.im / b.re, d = b.re + b.im * r;
            return rd_complex((a.re + a.im * r) / d, (a.im - a.re * r) / d);
        }
        T r = b.re / b.im, d = b.im + b.re * r;
        return rd_complex((a.re * r + a.im) / d, (a.im * r - a.re) / d);
    }
    friend RD_FN rd_complex operator-(rd_complex a) { return rd_complex(-a.re, -a.im); }
    friend RD_FN rd_complex operator+(rd_complex a) { return a; }
    friend RD_FN bool operator==(rd_complex a, rd_complex b) { return a.re == b.re && a.im == b.im; }
    friend RD_FN bool operator!=(rd_complex a, rd_complex b) { return !(a == b); }
};

// mixed real/complex arithmetic promotes the real operand (to the complex type's precision)
#define RD_MIXED(OP)                                                                              \
    template <typename T, typename S> RD_FN rd_complex<T> operator OP(rd_complex<T> a, S b) {    \
        return a OP rd_complex<T>((T)b);                                                          \
    }                                                                                             \
    template <typename T, typename S> RD_FN rd_complex<T> operator OP(S a, rd_complex<T> b) {    \
        return rd_complex<T>((T)a) OP b;                                                          \
    }
RD_MIXED(+)
RD_MIXED(-)
RD_MIXED(*)
RD_MIXED(/)
#undef RD_MIXED
// mixed-precision complex arithmetic promotes to the wider precision, as NumPy does
#define RD_MIXED_COMPLEX(OP)                                                                      \
    template <typename T, typename U>                                                             \
    RD_FN auto operator OP(rd_complex<T> a, rd_complex<U> b) -> rd_complex<decltype(T() + U())> { \
        typedef decltype(T() + U()) W;                                                            \
        return rd_complex<W>(a) OP rd_complex<W>(b);                                              \
    }
RD_MIXED_COMPLEX(+)
RD_MIXED_COMPLEX(-)
RD_MIXED_COMPLEX(*)
RD_MIXED_COMPLEX(/)
#undef RD_MIXED_COMPLEX
template <typename T, typename S> RD_FN bool operator==(rd_complex<T> a, S b) { return a == rd_complex<T>((T)b); }
template <typename T, typename S> RD_FN bool operator!=(rd_complex<T> a, S b) { return a != rd_complex<T>((T)b); }

template <typename T> RD_FN rd_complex<T> rd_conj(rd_complex<T> z) { return rd_complex<T>(z.re, -z.im); }
template <typename T> RD_FN T rd_conj(T x) { return x; }
template <typename T> RD_FN T rd_real(rd_complex<T> z) { return z.re; }
template <typename T> RD_FN T rd_real(T x) { return x; }
template <typename T> RD_FN T rd_imag(rd_complex<T> z) { return z.im; }
template <typename T> RD_FN T rd_imag(T) { return 0; }
template <typename T> RD_FN T rd_abs(rd_complex<T> z) { return hypot(z.re, z.im); }
RD_FN double rd_abs(double x) { return fabs(x); }
RD_FN float rd_abs(float x) { return fabsf(x); }
RD_FN rd_int rd_abs(rd_int x) { return x < 0 ? -x : x; }
RD_FN int rd_abs(int x) { return x < 0 ? -x : x; }
template <typename T> RD_FN rd_complex<T> sqrt(rd_complex<T> z) {  // principal branch
    T r = hypot(z.re, z.im);
    T s = sqrt((r + fabs(z.re)) / 2);
    if (s == 0) return rd_complex<T>(0, 0);
    if (z.re >= 0) return rd_complex<T>(s, z.im / (2 * s));
    return rd_complex<T>(fabs(z.im) / (2 * s), z.im >= 0 ? s : -s);
}
template <typename T> RD_FN rd_complex<T> exp(rd_complex<T> z) {
    T e = exp(z.re);
    return rd_complex<T>(e * cos(z.im), e * sin(z.im));
}
template <typename T> RD_FN rd_complex<T> log(rd_complex<T> z) {
    return rd_complex<T>(log(hypot(z.re, z.im)), atan2(z.im, z.re));
}
template <typename T> RD_FN rd_complex<T> sin(rd_complex<T> z) {
    return rd_complex<T>(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im));
}
template <typename T> RD_FN rd_complex<T> cos(rd_complex<T> z) {
    return rd_complex<T>(cos(z.re) * cosh(z.im), -(sin(z.re) * sinh(z.im)));
}
template <typename T> RD_FN rd_complex<T> sinh(rd_complex<T> z) {
    return rd_complex<T>(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im));
}
template <typename T> RD_FN rd_complex<T> cosh(rd_complex<T> z) {
    return rd_complex<T>(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im));
}
template <typename T> RD_FN rd_complex<T> tanh(rd_complex<T> z) {  // Kahan's formula: no overflow of sinh, cosh
    if (fabs(z.re) > 22) {  // tanh(x) rounds to +-1; the imaginary part is 4 sin y cos y e^(-2|x|)
        return rd_complex<T>(copysign((T)1, z.re), 4 * sin(z.im) * cos(z.im) * exp(-2 * fabs(z.re)));
    }
    T t = tan(z.im), beta = 1 + t * t, s = sinh(z.re), rho = sqrt(1 + s * s), d = 1 + beta * s * s;
    return rd_complex<T>(beta * rho * s / d, t / d);
}
template <typename T> RD_FN rd_complex<T> tan(rd_complex<T> z) {  // tan z = -i tanh(i z)
    rd_complex<T> h = tanh(rd_complex<T>(-z.im, z.re));
    return rd_complex<T>(h.im, -h.re);
}
template <typename T> RD_FN rd_complex<T> atan(rd_complex<T> z) {  // principal branch, as NumPy's arctan
    T x = z.re, y = z.im;
    if (fabs(x) > (T)1e18 || fabs(y) > (T)1e18) {  // atan z = +-pi/2 - 1/z, to every digit; x*x would overflow
        T h = hypot(x, y);
        return rd_complex<T>(copysign((T)1.5707963267948966, x), y / h / h);
    }
    return rd_complex<T>(atan2(2 * x, (1 - y) * (1 + y) - x * x) / 2, log1p(4 * y / (x * x + (1 - y) * (1 - y))) / 4);
}

// ---------------------------------------------------------------- Python semantics

template <typename T> RD_FN T rd_sign(T x) { return (T)((x > 0) - (x < 0)); }
template <typename A, typename B> RD_FN auto rd_min(A a, B b) -> decltype(a + b) { return b < a ? b : a; }
template <typename A, typename B> RD_FN auto rd_max(A a, B b) -> decltype(a + b) { return b > a ? b : a; }
// Python's % and // (as CPython computes them). Integers: the remainder takes the divisor's sign.
RD_FN rd_int rd_py_floordiv(rd_int a, rd_int b) {
    rd_int q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
RD_FN rd_int rd_py_mod(rd_int a, rd_int b) {
    rd_int r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Floats: CPython's float_divmod in the operands' precision. fmod is exact, so the remainder lies in
// [0, |b|) with b's sign even where a / b is too large for a - floor(a / b) * b (1e20 % 3 is 1, not
// 0); the quotient is (a - r) / b snapped to an integer.
template <typename T> RD_FN T rd_py_mod(T a, T b) {
    T r = fmod(a, b);
    if (r != 0) return ((b < 0) != (r < 0)) ? r + b : r;
    return copysign((T)0, b);
}
template <typename T> RD_FN T rd_py_floordiv(T a, T b) {
    T r = fmod(a, b);
    T q = (a - r) / b;
    if (r != 0 && ((b < 0) != (r < 0))) q -= 1;
    if (q == 0) return copysign((T)0, a / b);
    T f = floor(q);
    return q - f > (T)0.5 ? f + 1 : f;
}
// The type a % b and a // b compute in, as every arithmetic result (passes/infer.py, the CPU's
// rule): integers (and bools) in int64, in float32 where the floating operands are float32 (also
// beside an integer), in float64 where one is float64.
template <typename T> struct rd_divmod_rank { static const int value = 0; };
template <> struct rd_divmod_rank<float> { static const int value = 1; };
template <> struct rd_divmod_rank<double> { static const int value = 2; };
template <int R> struct rd_divmod_of { typedef double type; };
template <> struct rd_divmod_of<0> { typedef rd_int type; };
template <> struct rd_divmod_of<1> { typedef float type; };
template <typename A, typename B> struct rd_divmod_type {
    static const int ra = rd_divmod_rank<A>::value, rb = rd_divmod_rank<B>::value;
    typedef typename rd_divmod_of<(ra > rb ? ra : rb)>::type type;
};
template <typename A, typename B> RD_FN typename rd_divmod_type<A, B>::type rd_mod(A a, B b) {
    typedef typename rd_divmod_type<A, B>::type T;
    return rd_py_mod((T)a, (T)b);
}
template <typename A, typename B> RD_FN typename rd_divmod_type<A, B>::type rd_floordiv(A a, B b) {
    typedef typename rd_divmod_type<A, B>::type T;
    return rd_py_floordiv((T)a, (T)b);
}
RD_FN rd_int rd_trip_count(rd_int start, rd_int stop, rd_int step) {
    if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
    return start > stop ? (start - stop - step - 1) / (-step) : 0;
}
template <typename T> RD_FN T rd_pow(T x, rd_int n) {  // integer exponents by squaring, as LLVM's powi
    bool invert = n < 0;
    rd_int k = invert ? -n : n;
    T result = (T)1, base = x;
    while (k) {
        if (k & 1) result = result * base;
        base = base * base;
        k >>= 1;
    }
    return invert ? (T)1 / result : result;
}
RD_FN rd_int rd_pow(rd_int x, rd_int n) {
    rd_int result = 1;
    for (rd_int k = 0; k < n; ++k) result *= x;
    return result;
}
RD_FN double rd_pow(double x, double y) { return pow(x, y); }
RD_FN float rd_pow(float x, float y) { return powf(x, y); }
RD_FN double rd_pow(rd_int x, double y) { return pow((double)x, y); }
RD_FN double rd_pow(double x, int n) { return rd_pow(x, (rd_int)n); }
RD_FN float rd_pow(float x, int n) { return rd_pow(x, (rd_int)n); }
RD_FN float rd_pow(float x, double y) { return (float)pow((double)x, y); }
template <typename T> RD_FN rd_complex<T> rd_pow(rd_complex<T> z, rd_complex<T> w) {  // exp(w log z)
    if (z.re == 0 && z.im == 0) return rd_complex<T>(w.re == 0 && w.im == 0 ? 1 : 0);  // 0 ** w, Re w > 0
    return exp(w * log(z));
}
template <typename T> RD_FN rd_complex<T> rd_pow(rd_complex<T> z, double y) {
    if (z.re == 0 && z.im == 0) return rd_complex<T>(y == 0 ? 1 : 0);
    rd_complex<T> l = log(z);
    return exp(rd_complex<T>((T)(l.re * y), (T)(l.im * y)));
}
template <typename T> RD_FN rd_complex<T> rd_pow(rd_complex<T> z, float y) { return rd_pow(z, (double)y); }
template <typename T> RD_FN rd_complex<T> rd_pow(rd_complex<T> z, int n) { return rd_pow(z, (rd_int)n); }
template <typename T> RD_FN rd_complex<T> rd_pow(double x, rd_complex<T> w) { return rd_pow(rd_complex<T>((T)x), w); }
template <typename T> RD_FN rd_complex<T> rd_pow(float x, rd_complex<T> w) { return rd_pow(rd_complex<T>((T)x), w); }

// ---------------------------------------------------------------- runtime checks

struct rd_error {  // the first failure of a launch, read by the host after the kernel
    int code;      // 0 none, 1 check failed, 2 index out of bounds, 3 scratch exhausted
    int fkey, idx;
    rd_int batch;
    double v0, v1;
};

struct rd_status {  // one per thread
    rd_error* err;
    rd_int batch;           // this thread's batch element
    char* scratch;          // the scratch stack: this thread's own, or the interleaved stacks of all
    rd_int used, capacity;  // bytes of this thread's stack in use, and its size
    int failed;
    rd_int threads;         // interleaved: the threads whose stacks are interleaved (the batch size); else 1
};

#ifdef RD_HOST
RD_FN int rd_atomic_cas(int* p, int expected, int desired) {
    int old = *p;
    if (old == expected) *p = desired;
    return old;
}
#else
RD_FN int rd_atomic_cas(int* p, int expected, int desired) { return atomicCAS(p, expected, desired); }
#endif

// error codes of the record (``launch.py``: CHECK_FAILED, INDEX_OUT_OF_BOUNDS, SCRATCH_EXHAUSTED)
#define RD_CHECK_FAILED 1
#define RD_INDEX_OUT_OF_BOUNDS 2
#define RD_SCRATCH_EXHAUSTED 3

RD_COLD void rd_fail(rd_status* st, int code, int fkey, int idx, double v0, double v1) {
    st->failed = 1;
    if (rd_atomic_cas(&st->err->code, 0, code) == 0) {
        st->err->fkey = fkey;
        st->err->idx = idx;
        st->err->batch = st->batch;
        st->err->v0 = v0;
        st->err->v1 = v1;
    }
}

// ---------------------------------------------------------------- strided arrays

template <typename T, int N>
struct rd_array {
    T* data;
    rd_int shape[N];
    rd_int stride[N];  // in elements
    rd_status* st;     // where an out-of-bounds index is reported (checked builds)

    RD_FN T& at(rd_int offset) const { return data[offset]; }
    // a negative index counts from the end, as in Python and the compiled CPU backend (one select each)
    RD_FN rd_int wrap(int k, rd_int i) const { return i < 0 ? i + shape[k] : i; }
#ifdef RD_BOUNDSCHECK
    RD_FN bool out(int k, rd_int i) const {  // the index as written: -shape..shape-1 is in bounds
        if (i >= -shape[k] && i < shape[k]) return false;
        rd_fail(st, RD_INDEX_OUT_OF_BOUNDS, 0, k, (double)i, (double)shape[k]);
        return true;
    }
    RD_FN T& operator()(rd_int i) const { return out(0, i) ? data[0] : data[wrap(0, i) * stride[0]]; }
    RD_FN T& operator()(rd_int i, rd_int j) const {
        return (out(0, i) || out(1, j)) ? data[0] : data[wrap(0, i) * stride[0] + wrap(1, j) * stride[1]];
    }
    RD_FN T& operator()(rd_int i, rd_int j, rd_int k) const {
        return (out(0, i) || out(1, j) || out(2, k)) ? data[0]
            : data[wrap(0, i) * stride[0] + wrap(1, j) * stride[1] + wrap(2, k) * stride[2]];
    }
#else
    RD_FN T& operator()(rd_int i) const { return data[wrap(0, i) * stride[0]]; }
    RD_FN T& operator()(rd_int i, rd_int j) const { return data[wrap(0, i) * stride[0] + wrap(1, j) * stride[1]]; }
    RD_FN T& operator()(rd_int i, rd_int j, rd_int k) const {
        return data[wrap(0, i) * stride[0] + wrap(1, j) * stride[1] + wrap(2, k) * stride[2]];
    }
#endif
};

struct rd_sl {  // one index of a view: a position (drops the axis) or a Python slice
    rd_int start, stop, step;
    bool slice, has_start, has_stop;
};
RD_FN rd_sl rd_at(rd_int i) { rd_sl s = {i, i + 1, 1, false, true, true}; return s; }
RD_FN rd_sl rd_slice(bool has_start, rd_int start, bool has_stop, rd_int stop, rd_int step) {
    rd_sl s = {start, stop, step, true, has_start, has_stop};
    return s;
}

template <int M, typename T, int N>
RD_FN rd_array<T, M> rd_view(const rd_array<T, N>& a, const rd_sl (&ix)[N]) {
    rd_array<T, M> v;
    v.data = a.data;
    v.st = a.st;
    int k = 0;
    for (int d = 0; d < N; ++d) {
        rd_int n = a.shape[d];
        if (!ix[d].slice) {
            v.data += ix[d].start * a.stride[d];
            continue;
        }
        rd_int step = ix[d].step;
        rd_int lo = ix[d].has_start ? ix[d].start : (step > 0 ? 0 : n - 1);
        rd_int hi = ix[d].has_stop ? ix[d].stop : (step > 0 ? n : -n - 1);
        if (lo < 0) lo += n;
        if (hi < 0) hi += n;
        lo = lo < 0 ? (step > 0 ? 0 : -1) : (lo > n ? (step > 0 ? n : n - 1) : lo);
        hi = hi < 0 ? (step > 0 ? 0 : -1) : (hi > n ? n : hi);
        v.data += lo * a.stride[d];
        v.shape[k] = rd_trip_count(lo, hi, step);
        v.stride[k] = a.stride[d] * step;
        ++k;
    }
    return v;
}

template <typename T, int N>
RD_FN void rd_fill0(const rd_array<T, N>& a) {  // an ancilla: contiguous in units of its last stride
    rd_int size = 1;
    for (int d = 0; d < N; ++d) size *= a.shape[d];
    const rd_int unit = a.stride[N - 1];
    for (rd_int i = 0; i < size; ++i) a.data[i * unit] = T(0);
}

template <typename T, int N>
RD_FN bool rd_same_shape(const rd_array<T, N>& a, const rd_int (&shape)[N]) {
    for (int d = 0; d < N; ++d)
        if (a.shape[d] != shape[d]) return false;
    return true;
}

// an ancilla from the thread's scratch stack (released when the allocating function returns).
// Interleaved stacks (threads > 1): a thread's stack is a sequence of RD_ANCILLA_SLOT-byte slots (the
// largest ancilla element of the module, set by the kernel module), one element per slot; slot q of
// batch element b lies at (q * threads + b) * RD_ANCILLA_SLOT. The 32 threads of a warp then access
// 32 consecutive slots (coalesced, where separate stacks, each of the scratch size apart, take one
// transaction per thread), and a thread never touches another's slot, whatever type each allocates
// at the same offset.
#ifndef RD_ANCILLA_SLOT
#define RD_ANCILLA_SLOT 16
#endif
template <typename T, int N>
RD_FN rd_array<T, N> rd_alloc(rd_status* st, const rd_int (&shape)[N]) {
    static_assert(RD_ANCILLA_SLOT % sizeof(T) == 0, "an ancilla element larger than the module's slot");
    rd_array<T, N> a;
    a.st = st;
    const rd_int slot = st->threads > 1 ? RD_ANCILLA_SLOT : (rd_int)sizeof(T);
    const rd_int unit = st->threads * (slot / (rd_int)sizeof(T));  // elements of T from one to the next
    rd_int size = 1;
    for (int d = N - 1; d >= 0; --d) {
        a.shape[d] = shape[d];
        a.stride[d] = size * unit;
        size *= shape[d];
    }
    rd_int bytes = (size * slot + 15) / 16 * 16;
    if (st->used + bytes > st->capacity) {
        rd_fail(st, RD_SCRATCH_EXHAUSTED, 0, 0, (double)(st->used + bytes), (double)st->capacity);
        a.data = 0;
        return a;
    }
    a.data = (T*)(st->scratch + st->used * st->threads) + (st->threads > 1 ? st->batch : 0) * (slot / (rd_int)sizeof(T));
    st->used += bytes;
    rd_fill0(a);
    return a;
}

// the element b of a batched kernel argument, from its pointer and meta (shape..., strides...)
template <typename T, int N>
RD_FN rd_array<T, N> rd_element(T* p, const rd_int* meta, rd_int b, bool batched, rd_status* st) {
    rd_array<T, N> a;
    a.st = st;
    int first = batched ? 1 : 0, full = N + first;
    a.data = p + (batched ? b * meta[full] : 0);
    for (int d = 0; d < N; ++d) {
        a.shape[d] = meta[first + d];
        a.stride[d] = meta[full + first + d];
    }
    return a;
}

template <typename T, int N>
RD_FN void rd_copy(const rd_array<T, N>& dst, const rd_array<T, N>& src) {  // elementwise, any strides
    rd_int size = 1;
    for (int d = 0; d < N; ++d) size *= src.shape[d];
    for (rd_int flat = 0; flat < size; ++flat) {
        rd_int rest = flat, a = 0, b = 0;
        for (int d = N - 1; d >= 0; --d) {
            rd_int i = rest % src.shape[d];
            rest /= src.shape[d];
            a += i * dst.stride[d];
            b += i * src.stride[d];
        }
        dst.data[a] = src.data[b];
    }
}
