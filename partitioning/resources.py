"""Wall time and peak resident memory of one step of the current process (``ResourceMeter``).

``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is the peak resident set size over the whole
life of the process, so on its own it cannot say what one step (partitioning a graph) cost
when something earlier in the process used more. The meter combines two readings:

* if the lifetime peak rose during the step, the step set a new peak and that peak is
  exact (the kernel's own figure);
* otherwise the step stayed below an earlier peak; its own peak is then the maximum of the
  current RSS sampled every ``interval`` seconds by a background thread (which can miss a
  spike shorter than the interval).

For a figure that is exact whatever ran before, run the step in a fresh subprocess (as
``benchmarks/partition_scale.py`` does) and read that child's ``ru_maxrss``.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from types import TracebackType

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes (0 when it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:  # pragma: no cover - non-Linux
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001  pragma: no cover
        return 0


def proc_status_bytes(*keys: str) -> dict[str, int | None]:
    """Sizes from ``/proc/self/status`` in bytes by key (``VmHWM``, ``RssAnon``, ...); None for
    a key that cannot be read (not Linux, or no such line)."""
    out: dict[str, int | None] = dict.fromkeys(keys)
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                key = line.split(b":", 1)[0].decode()
                if key in out:
                    out[key] = int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return out


def available_memory_bytes() -> int | None:
    """The host's memory available to new allocations without swapping, in bytes (Linux's
    ``MemAvailable``: free memory plus the page cache the kernel can drop), or None where it
    cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def lifetime_peak_rss_bytes() -> int:
    """Peak resident set size of this process since it started, in bytes.

    Linux's ``VmHWM`` (the high-water mark of this process's own memory) where it can be read:
    ``ru_maxrss`` also keeps the peak of the process image replaced by ``exec``, so a worker
    spawned by a large parent (fork, then exec of a fresh interpreter) would report the
    parent's size. Elsewhere ``ru_maxrss``.
    """
    peak = proc_status_bytes("VmHWM")["VmHWM"]
    if peak is not None:
        return peak
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * _MAXRSS_UNIT


class ResourceMeter:
    """Context manager measuring the wall time and peak RSS of the code it wraps.

    Attributes (set on exit):
        seconds: wall-clock seconds (float).
        start_rss_bytes: RSS when the step started (int).
        peak_rss_bytes: peak RSS of the process during the step (int, see the module doc).
        peak_rss_exact: True when ``peak_rss_bytes`` is the kernel's figure, False when sampled.
        peak_rss_growth_bytes: ``peak_rss_bytes - start_rss_bytes`` (int >= 0): what the step
            itself added on top of what the process already held.

    Example::

        with ResourceMeter() as meter:
            parts = partitioner(data, 8)
        print(meter.seconds, meter.peak_rss_bytes)
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = float(interval)
        self.seconds = 0.0
        self.start_rss_bytes = 0
        self.peak_rss_bytes = 0
        self.peak_rss_exact = False
        self.peak_rss_growth_bytes = 0
        self._sampled = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._life0 = 0

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._sampled = max(self._sampled, current_rss_bytes())

    def __enter__(self) -> ResourceMeter:
        self._life0 = lifetime_peak_rss_bytes()
        self.start_rss_bytes = current_rss_bytes()
        self._sampled = self.start_rss_bytes
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name="rss-meter", daemon=True)
        self._thread.start()
        self._t0 = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.seconds = time.perf_counter() - self._t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sampled = max(self._sampled, current_rss_bytes())
        life1 = lifetime_peak_rss_bytes()
        if life1 > self._life0:
            self.peak_rss_bytes, self.peak_rss_exact = max(life1, sampled), True
        else:
            self.peak_rss_bytes, self.peak_rss_exact = sampled, False
        self.peak_rss_growth_bytes = max(0, self.peak_rss_bytes - self.start_rss_bytes)

    def as_dict(self, prefix: str = "") -> dict[str, float | int | bool]:
        """The readings as a JSON-ready dict, keys prefixed with ``prefix``."""
        return {
            f"{prefix}seconds": round(self.seconds, 4),
            f"{prefix}peak_rss_bytes": int(self.peak_rss_bytes),
            f"{prefix}peak_rss_growth_bytes": int(self.peak_rss_growth_bytes),
            f"{prefix}peak_rss_exact": bool(self.peak_rss_exact),
        }
