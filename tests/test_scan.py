"""The compiled scans of the high-level functions (``revdiff/programs/scan.py``): the largest
magnitudes of inputs, cotangents and results, the in-range test of the inputs and the rank ratios of
triangular factors, against NumPy."""
import numpy as np
import pytest

rng = np.random.default_rng(41)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_the_compiled_input_scan_agrees_with_numpy(dtype):
    """scan.in_range (one compiled pass over every argument) against NumPy's magnitudes and the
    in-range rule, per element, with NaN, Inf, zero columns and magnitudes at and beyond 2**±s."""
    from revdiff.programs.scan import in_range, safe_exponent
    s = 2.0 ** safe_exponent(np.dtype(dtype))
    A = rng.standard_normal((7, 5, 4)).astype(dtype)
    y = rng.standard_normal((7, 5)).astype(dtype)
    A[1, :, 2] = 0                       # a zero column: outside
    A[2, 3, 1] = np.nan
    A[3, 0, 0] = s                       # on the bound: inside
    A[4, 0, 3] = 2 * s if np.isfinite(dtype(2 * s)) else np.inf
    y[5, 2] = -np.inf
    y[6] = 1 / s if dtype in (np.float64, np.complex128) else 0  # on the lower bound: inside; zero: outside
    if np.iscomplexobj(A):
        A[0, 1, 1] = 3 - 4j              # max(|re|, |im|) = 4, not |z| = 5
        A[5, 2, 0] = complex(1, np.nan)  # a NaN imaginary part beside a finite real one
        y[4, 1] = complex(np.nan, 2)
    bigs, inside = in_range([(A, True), (y, False)])
    magnitude = lambda a: np.maximum(np.abs(a.real), np.abs(a.imag)).astype(np.float64)  # noqa: E731 (NaN sticks)
    expected = [magnitude(A).max(axis=1), magnitude(y).max(axis=1)]
    for big, want in zip(bigs, expected):
        np.testing.assert_array_equal(big, want)   # NaN where a NaN is, in the same places
    in_bounds = lambda big: np.all((big >= 1 / s) & (big <= s))  # noqa: E731
    assert inside == [in_bounds(expected[0]), in_bounds(expected[1])] == [False, False]
    for b in range(7):  # per element: the batch's flag is every element's
        one_bigs, one_inside = in_range([(A[b:b + 1], True), (y[b:b + 1], False)])
        assert one_inside == [in_bounds(expected[0][b]), in_bounds(expected[1][b])], b
    assert in_range([(A[:1], True), (y[:1], False)])[1] == [True, True]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("length", [0, 1, 7, 8, 9, 23, 69])
def test_the_element_scans_chains_and_remainder_agree_with_numpy(dtype, length):
    """largest_per_element and in_range's per-element scan keep interleaved running maxima and a
    remainder loop: a NaN, an Inf or the largest entry at any position (each in its own row), on
    contiguous rows and on Fortran-ordered and strided views (the kernels compiled for those
    layouts), gives NumPy's answer."""
    from revdiff.programs.scan import COMPILED_MIN_SIZE, in_range, largest_per_element
    batch = max(4, COMPILED_MIN_SIZE // max(length, 1) + 1)  # above the NumPy fallback's size
    x = rng.standard_normal((batch, length)).astype(dtype)
    for j in range(length):  # the largest entry, a NaN and an Inf walk through every chain and the remainder
        x[j, j] = 50.0
        x[length + j, j] = np.nan
        x[2 * length + j, j] = -np.inf
    if length and np.iscomplexobj(x):
        x[-1, 0] = complex(1, np.nan)
    magnitude = lambda a: np.maximum(np.abs(a.real), np.abs(a.imag)).astype(np.float64)  # noqa: E731
    for view in (x, np.asfortranarray(x), np.repeat(x, 2, axis=1)[:, ::2]):
        want = magnitude(view).max(axis=1) if length else np.zeros(batch)
        np.testing.assert_array_equal(largest_per_element(view), want)
        if length:  # in_range scans arrays with entries
            np.testing.assert_array_equal(in_range([(view, False)])[0][0], want)


def test_the_rank_kernel_reports_each_factors_smallest_ratio():
    from revdiff.programs.scan import rank_ratios
    R = np.triu(rng.standard_normal((4, 5, 6)))
    R[1, 2, 2] = 0            # a dependent column: ratio 0
    R[2, :, 3] = 0            # a zero column: ratio 0
    R[3, 1, 4] = np.nan       # NaN sticks
    ratios, lowest = rank_ratios(R)
    norms = np.linalg.norm(R[:, :, :5], axis=1)
    want = np.where(norms > 0, np.abs(np.diagonal(R[:, :, :5], axis1=1, axis2=2)) / np.where(norms > 0, norms, 1), 0)
    np.testing.assert_allclose(ratios[[0, 1, 2]], want[[0, 1, 2]], rtol=1e-14)
    assert np.isnan(ratios[3, 4]) and np.isnan(lowest[3])
    np.testing.assert_array_equal(lowest[:3], ratios[:3].min(axis=1))
    assert lowest[1] == lowest[2] == 0
