"""CPU process settings that change speed, never results.

`tune_malloc`: glibc returns every freed block above its mmap threshold (128 KiB to start, raised
adaptively up to 32 MiB) to the operating system, so a loop that allocates and frees the same
few-MB tensors every step (a growing KV cache, activations, their gradients) page-faults fresh
zeroed pages on every allocation. Raising the mmap and trim thresholds keeps such blocks in the
heap for reuse. On the embedded tiny model this cut minor page faults ~10x and sampling time by
~20-30% (LOG.md, 2026-11-30 session 3). The PyTorch CPU performance guides make the same point
with jemalloc/tcmalloc; this needs no extra library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's largest allowed mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
THRESHOLD = 32 * 1024 * 1024

_done: bool | None = None


def tune_malloc() -> bool:
    """Set glibc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD to 32 MiB for this process (once).
    Returns whether both took effect; False (and nothing changed) off Linux/glibc."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, THRESHOLD))
    return _done
