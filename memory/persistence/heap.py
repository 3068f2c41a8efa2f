"""Giving back the memory an open freed: the C heap's free pages returned to the system, where glibc allows it.

Opening a large store makes many short-lived buffers of one to a few MB (run bodies, decoded
sections, projections, the tables of growing dicts). glibc's allocator maps buffers that large
apart, and returns them when freed, until a larger one is freed: its threshold then rises to that
size (up to 32 MB), and later buffers under it come from the heap, whose free pages between those
still in use stay in the process. On the bench's 100,000-episode store they were 26 to 31 MB of
the resident set after an open (with the threshold fixed at 1 MB, the same open kept 22 MB less:
it is the rise). `release_free_pages` asks glibc to return them (``malloc_trim``, about 2 ms
there); with another C library it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (another system, or another C library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library the interpreter runs on
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)  # glibc's; musl has none
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_pages() -> bool:
    """Return the C heap's free pages to the system; whether the C library could be asked."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)  # 0: keep no free space at the top of the heap either
    return True
