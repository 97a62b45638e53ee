"""What a script holds when it ends, apart from what the interpreter's teardown frees: module
globals hold device memory through objects that free it in __del__ (as a PyTorch tensor does),
so Py_FinalizeEx frees it after the script's last line. tests/tests/python.rs checks that the
exit dump notes the moment finalization began, with what each stack held then.

usage: teardown.py NULLCUDA_DIR

Expected: 4 x 1000 B held by `Buffer` objects in the list `kept`, freed by teardown; 2000 B
never freed (live at exit); 3000 B allocated and freed while the script runs.
"""
import ctypes
import sys

rt = ctypes.CDLL(sys.argv[1] + "/libcudart.so.13")


def cuda_malloc(size):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p


class Buffer:
    def __init__(self, size):
        self.ptr = cuda_malloc(size)  # @buffer

    def __del__(self):
        rt.cudaFree(self.ptr)


kept = [Buffer(1000) for _ in range(4)]
never_freed = cuda_malloc(2000)  # @never
gone = Buffer(3000)
del gone
print("done")
