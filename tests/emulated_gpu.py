"""A GPU without a GPU, for the tests of revdiff's device path: a stand-in ``cupy`` module whose
arrays live in host memory but behave as CuPy's do where it matters (they carry
``__cuda_array_interface__``; NumPy cannot convert them implicitly; CuPy functions refuse host
arrays), and kernels run as host C++ compiled from the very CUDA source (``HostModule``)."""
from __future__ import annotations

import operator
import sys
import types

import numpy as np

from revdiff.ir.signature import ENTRY_KINDS
from revdiff.targets.cuda import launch
from revdiff.targets.cuda import programs as kernels


class DeviceArray:
    """An array "on the GPU": a NumPy array behind an interface that refuses implicit host copies."""

    __array_priority__ = 100

    def __init__(self, host: np.ndarray):
        self._host = host

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self._host.shape, "typestr": self._host.dtype.str, "version": 3,
                "data": (self._host.ctypes.data, False), "strides": self._host.strides}

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def get(self) -> np.ndarray:
        return self._host.copy()

    def __getattr__(self, name):
        return _device_result(getattr(self._host, name))

    def __getitem__(self, key):
        return _wrap(self._host[_host_key(key)])

    def __setitem__(self, key, value):
        if type(value) is np.ndarray and value.ndim and not (key is Ellipsis or key == slice(None)):
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        self._host[_host_key(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self._host)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._host)

    def __float__(self) -> float:
        return float(self._host)

    def __int__(self) -> int:
        return int(self._host)

    def __index__(self) -> int:
        return operator.index(self._host)

    def __repr__(self) -> str:
        return f"DeviceArray({self._host!r})"


def _host_key(key):
    if isinstance(key, tuple):
        return tuple(_unwrap(k) for k in key)
    return _unwrap(key)


def _unwrap(x):
    """The host array behind a device array; a host array with axes is refused, as CuPy refuses it."""
    if isinstance(x, DeviceArray):
        return x._host
    if type(x) is np.ndarray and x.ndim:
        raise TypeError(f"Unsupported type {type(x)}")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic):  # CuPy gives 0-d arrays where NumPy gives scalars
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    return x


def _device_result(value):
    """A NumPy function or method as CuPy's: device arguments in, device arrays out."""
    if isinstance(value, type):
        return value
    if not callable(value):  # an attribute: ``.T``, ``.real`` are device arrays too
        return _wrap(value)

    def call(*args, **kwargs):
        return _wrap(value(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))

    return call


def _operator(name):
    def method(self, *others):
        return _wrap(getattr(self._host, name)(*(_unwrap(o) for o in others)))
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor"):
    for _form in (f"__{_name}__", f"__r{_name}__"):
        setattr(DeviceArray, _form, _operator(_form))
    setattr(DeviceArray, f"__i{_name}__", lambda self, other, _n=f"__i{_name}__": (
        getattr(self._host, _n)(_unwrap(other)), self)[1])
for _form in ("__neg__", "__pos__", "__abs__", "__invert__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__",
              "__ne__"):
    setattr(DeviceArray, _form, _operator(_form))


def asarray(a, dtype=None, order=None):
    if isinstance(a, DeviceArray):
        return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
    if hasattr(a, "__cuda_array_interface__"):
        raise TypeError("the emulated GPU holds only its own arrays")
    return DeviceArray(np.array(a, dtype=dtype, order=order or "K"))


def asnumpy(a) -> np.ndarray:
    return a.get() if isinstance(a, DeviceArray) else np.asarray(a)


class _Cupy(types.ModuleType):
    """The module: ``asarray``, ``asnumpy``, ``ndarray``, and every other NumPy function as CuPy's."""

    def __init__(self):
        super().__init__("cupy")
        self.__file__ = __file__
        self.ndarray, self.asarray, self.array, self.asnumpy = DeviceArray, asarray, asarray, asnumpy

    def __getattr__(self, name):
        value = getattr(np, name)
        if isinstance(value, type) or not callable(value):
            return value
        return _device_result(value)


def host_run_on_device(modules: dict):
    """A ``run_on_device`` that runs the entry's CUDA source as host C++, in place on the device arrays."""
    def run(bf, kind, arrays, types_):
        key = (bf, types_)
        if key not in modules:  # one module for every kind: a g++ run costs seconds
            entries = [(bf, k, types_) for k in ENTRY_KINDS]
            source = kernels.module_source(entries, check=bf.f.forward_function.options.check, host=True)
            modules[key] = launch.HostModule(source, "emulated_" + bf.f.__name__)
        for a in arrays:
            assert isinstance(a, DeviceArray) or np.ndim(a) == 0, f"a host array reached the GPU: {type(a)}"
        kernels.run_on_host(modules[key], bf, kind, [a._host if isinstance(a, DeviceArray) else a for a in arrays],
                            types_)
    return run


def install(monkeypatch) -> types.ModuleType:
    """Make ``cupy`` the stand-in and GPU launches host runs, for one test; returns the module."""
    import revdiff.batching
    fake = _Cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    fake.host_modules = {}  # (batched function, element types) -> its host-built kernel module
    monkeypatch.setattr(revdiff.batching, "run_on_device", host_run_on_device(fake.host_modules))
    return fake
