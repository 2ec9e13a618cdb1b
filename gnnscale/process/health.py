"""Heartbeats and phases: when a collective times out, name the silent rank and where it stopped.

A gloo or NCCL timeout only says that *this* rank waited too long; it does not say which peer
went silent. Every rank therefore runs a :class:`Health` monitor: a daemon thread that writes a
heartbeat (a counter, the pid, the host, and the phase of each of its threads: ``main: epoch 1
step 3 forward/backward; gnnscale-prefetch: epoch 1 step 4 sampling``) into the rendezvous's
own key-value store (torch's ``TCPStore`` at MASTER_ADDR:MASTER_PORT, which torchrun and
:func:`gnnscale.process.groups.launch_local` both provide) every ``interval`` seconds. When a
collective fails, :meth:`Health.diagnose` reads every rank's heartbeat twice, ``probe``
seconds apart: a rank whose counter did not move is silent (stopped, hung in native code, or
dead), and the error names it with its last phase.

The store is reached through a client of its own with a short timeout, so a diagnosis never
waits longer than about ``probe + store_timeout`` seconds, even when the store's host is the
silent one.

Fault injection (tests): ``GNNSCALE_FAULT="rank=1,epoch=1,step=2,phase=sampling,action=stop"``
makes that rank act when it enters that phase: ``stop`` sends itself SIGSTOP (a hung peer),
``exit`` ends it at once with status 3 (a dead peer), ``kill`` sends itself SIGKILL (a killed
worker). With ``once=FILE`` it acts only if FILE does not exist, and creates it first (so a
restarted run goes through). It is logged as a warning.
"""
from __future__ import annotations

import datetime
import logging
import os
import signal
import socket
import threading
import time

import torch.distributed as dist

log = logging.getLogger(__name__)

_PREFIX = "gnnscale/health"
# Thread names -> the names the diagnosis uses.
_ROLES = {"MainThread": "main", "gnnscale-prefetch": "prefetch", "gnnscale-embedding-push": "push"}


def _role() -> str:
    name = threading.current_thread().name
    return _ROLES.get(name, name)


def _parse_fault(text: str | None) -> dict | None:
    """``"rank=1,epoch=1,step=2,phase=sampling,action=stop"`` -> dict (None when unset)."""
    if not text:
        return None
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"GNNSCALE_FAULT items must be key=value, found {item!r} in {text!r}")
        out[key.strip()] = value.strip()
    if out.get("action", "stop") not in ("stop", "exit", "kill"):
        raise ValueError(f"GNNSCALE_FAULT action must be stop, exit or kill, found {out['action']!r}")
    return out


class Health:
    """One rank's heartbeat and phases, and the diagnosis of silent peers.

    Args:
        rank, world_size: this process's place.
        timeout: the run's timeout in seconds (the heartbeat interval and probe scale with it).
        store: a torch.distributed Store shared by all ranks; None connects a client to
            MASTER_ADDR:MASTER_PORT (None for a single process: nothing to diagnose).
        interval: seconds between heartbeats (default: timeout / 20, within [0.2, 2]).
    """

    def __init__(self, rank: int, world_size: int, timeout: float, store=None, interval: float | None = None) -> None:
        self.rank = rank
        self.world = world_size
        self.timeout = float(timeout)
        self.interval = interval if interval is not None else min(2.0, max(0.2, self.timeout / 20))
        self.probe = 2.5 * self.interval + 0.5
        self.store = store
        self._lock = threading.Lock()
        self._phases: dict[str, str] = {}
        self._count = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prefix = f"{_PREFIX}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        self._host = socket.gethostname()
        self._fault = _parse_fault(os.environ.get("GNNSCALE_FAULT"))
        if self._fault is not None and int(self._fault.get("rank", -1)) != rank:
            self._fault = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> "Health":
        """Connect (if needed) and start the heartbeat thread; a no-op for one process."""
        if self.world <= 1 or self._thread is not None:
            return self
        if self.store is None:
            self.store = dist.TCPStore(
                os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                timeout=datetime.timedelta(seconds=max(2.0, min(10.0, self.timeout / 2))),
            )
        self._beat()
        self._thread = threading.Thread(target=self._run, name="gnnscale-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat()
            except Exception as err:  # noqa: BLE001 - the store's host may be gone; keep trying
                log.debug("rank %d: heartbeat not written: %s", self.rank, err)

    def _beat(self) -> None:
        with self._lock:
            self._count += 1
            phases = "; ".join(f"{k}: {v}" for k, v in self._phases.items()) or "starting"
            record = f"{self._count}|{os.getpid()}|{self._host}|{time.time():.3f}|{phases}"
        self.store.set(f"{self._prefix}/{self.rank}", record)

    # -- phases --------------------------------------------------------------------------
    def enter(self, phase: str, epoch: int | None = None, step: int | None = None) -> None:
        """Record that the calling thread is now in ``phase`` (e.g. "sampling") at epoch/step."""
        where = ("" if epoch is None else f"epoch {epoch} ") + ("" if step is None else f"step {step} ")
        with self._lock:
            self._phases[_role()] = where + phase
        if self._fault is not None:
            self._maybe_fault(phase, epoch, step)

    def leave(self) -> None:
        """The calling thread has finished its work (a background thread that ends)."""
        with self._lock:
            self._phases.pop(_role(), None)

    def phase(self) -> str:
        with self._lock:
            return "; ".join(f"{k}: {v}" for k, v in self._phases.items())

    def _maybe_fault(self, phase: str, epoch, step) -> None:
        f = self._fault
        if f.get("phase", phase) != phase:
            return
        if "epoch" in f and (epoch is None or int(f["epoch"]) != epoch):
            return
        if "step" in f and (step is None or int(f["step"]) != step):
            return
        self._fault = None
        once = f.get("once")
        if once:
            if os.path.exists(once):
                return
            open(once, "w").close()
        action = f.get("action", "stop")
        if self.store is not None:
            self._beat()  # the phase the peers will name
        log.warning("rank %d: fault injection (GNNSCALE_FAULT): %s pid %d at epoch %s step %s %s",
                    self.rank, action, os.getpid(), epoch, step, phase)
        for h in logging.getLogger().handlers:
            h.flush()
        if action == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL if action == "kill" else signal.SIGSTOP)

    # -- diagnosis -----------------------------------------------------------------------
    def _read(self) -> dict[int, list[str] | None]:
        out: dict[int, list[str] | None] = {}
        for r in range(self.world):
            if r == self.rank:
                continue
            key = f"{self._prefix}/{r}"
            try:
                out[r] = self.store.get(key).decode().split("|", 4) if self.store.check([key]) else None
            except Exception:  # noqa: BLE001 - the store's host may be the silent one
                out[r] = ["store"]
        return out

    def silent_ranks(self) -> list[dict]:
        """Peers whose heartbeat did not move during a probe of ``self.probe`` seconds.

        Each: ``{"rank", "phase", "pid", "host", "last_beat"}`` (None when never seen).
        """
        if self.store is None or self.world <= 1:
            return []
        first = self._read()
        time.sleep(self.probe)
        second = self._read()
        silent = []
        for r in sorted(first):
            a, b = first[r], second[r]
            if b is not None and b[0] == "store":
                silent.append({"rank": r, "phase": None, "pid": None, "host": None, "last_beat": None,
                               "store": True})
            elif b is None or (a is not None and a[0] == b[0]):
                rec = b or a
                silent.append({"rank": r, "phase": rec[4] if rec else None, "pid": rec[1] if rec else None,
                               "host": rec[2] if rec else None, "last_beat": float(rec[3]) if rec else None})
        return silent

    def diagnose(self) -> str:
        """One sentence naming the silent peers and their last phase ("" when none is found)."""
        try:
            silent = self.silent_ranks()
        except Exception as err:  # noqa: BLE001 - a diagnosis must never hide the first error
            return f"the peers' heartbeats could not be read ({err})"
        if not silent:
            return ""
        parts = []
        for s in silent:
            if s.get("store"):
                parts.append(f"rank {s['rank']}'s heartbeat could not be read (the rendezvous store at "
                             f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} did not answer: "
                             "its host, rank 0 under --workers, may be the silent one)")
            elif s["phase"] is None:
                parts.append(f"rank {s['rank']} never sent a heartbeat")
            else:
                ago = time.time() - s["last_beat"]
                parts.append(f"rank {s['rank']} (pid {s['pid']} on {s['host']}) is silent: no heartbeat for "
                             f"{ago:.1f} s; its last phase: {s['phase']}")
        return "; ".join(parts)

