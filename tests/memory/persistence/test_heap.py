"""Opening gives the C heap's free pages back where the C library is glibc (`memory.persistence.heap`)."""

import ctypes
import sys

import pytest

from memory.persistence.heap import release_free_pages


def glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "gnu_get_libc_version")
    except OSError:
        return False


@pytest.mark.skipif(not glibc(), reason="malloc_trim is glibc's")
def test_the_free_pages_are_released_on_glibc_and_memory_stays_usable():
    kept = [bytearray(1 << 20) for _ in range(8)]
    del kept[::2]  # holes between buffers still in use
    assert release_free_pages() and release_free_pages()
    assert all(len(buffer) == 1 << 20 and not any(buffer[:: 1 << 12]) for buffer in kept)
