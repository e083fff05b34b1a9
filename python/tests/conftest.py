import ctypes

import numpy as np
import pytest


def blobs(n=512, features=16, classes=4, seed=0, separation=3.0):
    """A seeded Gaussian-blob classification set (float32 X [n, features], int64 labels [n])."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, features)) * separation
    y = rng.integers(0, classes, size=n)
    X = centers[y] + rng.normal(size=(n, features))
    return X.astype(np.float32), y.astype(np.int64)


@pytest.fixture
def data():
    return blobs()


class DLPackOnly:
    """Exposes an array through __dlpack__ / __dlpack_device__ only (no buffer, no __array__)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


# A DLPack producer that claims its data is on a CUDA device (the data pointer is host memory,
# never read): exercises the device checks on a machine without a GPU.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCudaTensor:
    """Claims to be a float32/int32 CUDA tensor of the given shape on cuda:device_id."""

    def __init__(self, shape, dtype=np.float32, device_id=0):
        self._host = np.zeros(shape, dtype=dtype)
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._keep = []
        self.device_id = device_id
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    def __dlpack_device__(self):
        return (2, self.device_id)

    def __dlpack__(self, **kwargs):
        code = {"f": 2, "i": 0, "u": 1}[self.dtype.kind]
        mt = _DLManagedTensor()
        mt.dl_tensor.data = self._host.ctypes.data
        mt.dl_tensor.device = _DLDevice(2, self.device_id)
        mt.dl_tensor.ndim = len(self.shape)
        mt.dl_tensor.dtype = _DLDataType(code, self.dtype.itemsize * 8, 1)
        mt.dl_tensor.shape = self._shape
        mt.dl_tensor.strides = None
        mt.dl_tensor.byte_offset = 0
        mt.deleter = None
        self._keep.append(mt)
        return _PyCapsule_New(ctypes.addressof(mt), b"dltensor", None)
