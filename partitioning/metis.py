"""k-way METIS partitioning with multi-constraint vertex weights.

METIS balances every weight column ("constraint") separately, which is how gnnscale gives each
part about the same number of nodes *and* of training nodes. pymetis 2025.2.2 silently drops
multi-constraint weights (on a 100k-node band graph with a contiguous block of 20k training
nodes it put 3146/0/16854/0 training nodes in 4 parts), so we call ``METIS_PartGraphKway`` of
METIS's own shared library directly through ctypes (METIS 5.1 balanced the same graph to
5087/5038/4897/4978). That library comes from pip: the ``cmeel-metis`` wheel (a dependency)
ships METIS 5.2.1's ``libmetis.so`` with its ``libGKlib.so`` under
``site-packages/cmeel.prefix/lib``; it is preferred over a system ``libmetis5`` so that every
machine partitions with the same build. pymetis is only the fallback, and then only the first
constraint is honoured.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import re
import site
import sys
import sysconfig
import warnings
from dataclasses import dataclass

import numpy as np

from gnnscale.errors import PartitionError

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "libmetis", "pymetis")

# Constants of METIS 5.x (metis.h).
_METIS_NOPTIONS = 40
_METIS_OK = 1
_METIS_STATUS = {-2: "METIS_ERROR_INPUT", -3: "METIS_ERROR_MEMORY", -4: "METIS_ERROR"}
# Indices into options[] of METIS 5.1 (Debian's libmetis5). METIS 5.2 inserted NIPARTS and
# ONDISK into the enum, which moves every index from NITER on: the indices in use are read from
# the metis.h that comes with the loaded library (see _option_indices).
_OPTIONS_51 = {"NITER": 6, "NCUTS": 7, "SEED": 8, "CONTIG": 11, "UFACTOR": 16, "NUMBERING": 17}

_HEADER_CANDIDATES = ("/usr/include/metis.h", "/usr/local/include/metis.h")
_INSTALL_HINT = (
    "`pip install cmeel-metis` (METIS 5.2.1, a gnnscale dependency), or `apt-get install "
    "libmetis5`, or set GNNSCALE_LIBMETIS to a libmetis.so"
)


@dataclass(frozen=True)
class _LibMetis:
    """A loaded METIS shared library and the C types of its ``idx_t`` and ``real_t``."""

    lib: ctypes.CDLL
    path: str
    idx_dtype: np.dtype
    real_dtype: np.dtype
    options: dict  # option name ("NITER", ...) -> index into options[]


def _read_header(headers: tuple[str, ...]) -> tuple[str, str] | None:
    """(path, text) of the first readable metis.h among ``headers``, or None."""
    for header in headers:
        try:
            with open(header, encoding="utf-8", errors="replace") as fh:
                return header, fh.read()
        except OSError:
            continue
    return None


def _header_widths(headers: tuple[str, ...] = _HEADER_CANDIDATES) -> tuple[int, int]:
    """(IDXTYPEWIDTH, REALTYPEWIDTH) from the first readable metis.h, else (32, 32)."""
    found = _read_header(headers)
    if found is not None:
        header, text = found
        idx = re.search(r"^\s*#define\s+IDXTYPEWIDTH\s+(\d+)", text, re.MULTILINE)
        real = re.search(r"^\s*#define\s+REALTYPEWIDTH\s+(\d+)", text, re.MULTILINE)
        idx_w = int(idx.group(1)) if idx else 32
        real_w = int(real.group(1)) if real else 32
        logger.debug("METIS header %s: IDXTYPEWIDTH=%d REALTYPEWIDTH=%d", header, idx_w, real_w)
        return idx_w, real_w
    logger.debug("no metis.h found; assuming 32-bit idx_t and real_t (Debian/Ubuntu default)")
    return 32, 32


def _cmeel_prefixes() -> list[str]:
    """``cmeel.prefix`` folders of the site-packages on ``sys.path`` (where cmeel wheels go)."""
    roots = [sysconfig.get_paths().get("platlib"), sysconfig.get_paths().get("purelib")]
    try:
        roots += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    roots += sys.path
    seen: list[str] = []
    for root in roots:
        if not root:
            continue
        prefix = os.path.join(root, "cmeel.prefix")
        if os.path.isdir(prefix) and prefix not in seen:
            seen.append(prefix)
    return seen


def _library_candidates() -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(library, libraries to load globally first, metis.h candidates), in preference order.

    The ``GNNSCALE_LIBMETIS`` environment variable (a path) first, then the ``cmeel-metis``
    wheel (its ``libmetis.so`` needs ``libGKlib.so`` loaded globally first, and its own
    ``metis.h`` gives the type widths), then the system's ``libmetis``.
    """
    out: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    env = os.environ.get("GNNSCALE_LIBMETIS")
    if env:
        out.append((env, (), _HEADER_CANDIDATES))
    for prefix in _cmeel_prefixes():
        lib = os.path.join(prefix, "lib", "libmetis.so")
        if os.path.exists(lib):
            gk = os.path.join(prefix, "lib", "libGKlib.so")
            header = os.path.join(prefix, "include", "metis.h")
            out.append((lib, (gk,) if os.path.exists(gk) else (), (header,)))
    found = ctypes.util.find_library("metis")
    if found:
        out.append((found, (), _HEADER_CANDIDATES))
    out.append(("libmetis.so.5", (), _HEADER_CANDIDATES))
    return out


def _option_indices(headers: tuple[str, ...]) -> dict:
    """Index of each METIS_OPTION_* in options[], from the first readable metis.h's enum.

    Without a header (Debian's ``libmetis5`` without ``libmetis-dev``) METIS 5.1's layout.
    """
    found = _read_header(headers)
    body = re.search(r"typedef\s+enum\s*\{([^}]*)\}\s*moptions_et", found[1]) if found else None
    if body is not None:
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", body.group(1), flags=re.DOTALL)
        names = re.findall(r"METIS_OPTION_(\w+)\s*(?:=\s*(\d+))?", text)
        out, nxt = {}, 0
        for name, value in names:
            nxt = int(value) if value else nxt
            out[name] = nxt
            nxt += 1
        if all(k in out for k in _OPTIONS_51):
            return {k: out[k] for k in _OPTIONS_51}
    return dict(_OPTIONS_51)


@functools.lru_cache(maxsize=1)
def find_libmetis() -> _LibMetis | None:
    """Load the METIS shared library, or return None when none is installed.

    Looked up, in order: the ``GNNSCALE_LIBMETIS`` environment variable (a path), the
    ``cmeel-metis`` wheel's ``cmeel.prefix/lib/libmetis.so`` (METIS 5.2.1, installed with
    gnnscale, so every machine uses the same build), ``ctypes.util.find_library("metis")``,
    then ``libmetis.so.5`` (Debian's ``libmetis5``).
    """
    for name, preload, headers in _library_candidates():
        try:
            for dep in preload:
                ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
            lib = ctypes.CDLL(name)
            lib.METIS_PartGraphKway  # noqa: B018  (symbol check)
            lib.METIS_PartGraphRecursive  # noqa: B018
            lib.METIS_SetDefaultOptions  # noqa: B018
        except (OSError, AttributeError) as exc:
            logger.debug("METIS library %s not usable: %s", name, exc)
            continue
        idx_w, real_w = _header_widths(headers)
        if idx_w not in (32, 64) or real_w not in (32, 64):
            raise PartitionError(
                f"expected IDXTYPEWIDTH and REALTYPEWIDTH of 32 or 64 in metis.h, found "
                f"{idx_w} and {real_w}; reinstall METIS (`apt-get install libmetis-dev`)"
            )
        idx_dtype = np.dtype(np.int32 if idx_w == 32 else np.int64)
        real_dtype = np.dtype(np.float32 if real_w == 32 else np.float64)
        lib.METIS_PartGraphKway.restype = ctypes.c_int
        lib.METIS_PartGraphRecursive.restype = ctypes.c_int
        lib.METIS_SetDefaultOptions.restype = ctypes.c_int
        logger.debug("using METIS library %s (idx_t %s, real_t %s)", name, idx_dtype, real_dtype)
        return _LibMetis(lib=lib, path=name, idx_dtype=idx_dtype, real_dtype=real_dtype,
                         options=_option_indices(headers))
    return None


def _check_weights(vertex_weights: np.ndarray | None, n: int) -> np.ndarray | None:
    """Validate vertex weights and return them as int64 ``[N, ncon]`` (None stays None)."""
    if vertex_weights is None:
        return None
    vw = np.asarray(vertex_weights)
    if vw.ndim == 1:
        vw = vw[:, None]
    if vw.ndim != 2 or vw.shape[0] != n or vw.shape[1] < 1:
        raise PartitionError(
            f"expected vertex_weights of shape [{n}] or [{n}, ncon], found shape "
            f"{tuple(np.shape(vertex_weights))}; build one weight column per balance constraint"
        )
    if not (np.issubdtype(vw.dtype, np.integer) or vw.dtype == np.bool_):
        raise PartitionError(
            f"expected integer vertex_weights, found dtype {vw.dtype}; METIS only accepts "
            "integer weights, scale and round them first"
        )
    vw = vw.astype(np.int64, copy=False)
    if vw.size and int(vw.min()) < 0:
        raise PartitionError(
            f"expected non-negative vertex_weights, found minimum {int(vw.min())}; "
            "clip the weights at 0"
        )
    return vw


def _check_edge_weights(edge_weights: np.ndarray | None, m2: int) -> np.ndarray | None:
    """Validate adjacency weights and return them as int64 ``[2M]`` (None stays None)."""
    if edge_weights is None:
        return None
    ew = np.asarray(edge_weights)
    if ew.shape != (m2,):
        raise PartitionError(
            f"expected edge_weights of shape [{m2}] (one per adjacency entry), found shape "
            f"{tuple(ew.shape)}; build them with to_undirected_csr_weighted"
        )
    if not np.issubdtype(ew.dtype, np.integer):
        raise PartitionError(
            f"expected integer edge_weights, found dtype {ew.dtype}; METIS only accepts integer "
            "weights, scale and round them first (see integer_edge_weights)"
        )
    ew = ew.astype(np.int64, copy=False)
    if ew.size and int(ew.min()) < 0:
        raise PartitionError(
            f"expected non-negative edge_weights, found minimum {int(ew.min())}; clip them at 0"
        )
    return ew


def integer_edge_weights(weights: np.ndarray, resolution: int = 1000) -> np.ndarray:
    """Real edge weights -> METIS's positive integers (int64, same shape).

    Integer-valued weights with a maximum up to ``resolution * 1000`` are kept as they are
    (zeros become 1); otherwise weights are scaled so that the largest becomes
    ``resolution`` and rounded, with a minimum of 1 (METIS treats a weight as an edge's
    importance, so a tiny positive weight must not vanish).

    Args:
        weights: float or int ``[K]``, finite and non-negative.
        resolution: integer weight given to the largest edge when scaling.

    Returns:
        int64 ``[K]`` with values >= 1.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.isfinite(w).all() or float(w.min()) < 0:
        raise PartitionError(
            f"expected finite non-negative edge weights, found values in [{float(np.nanmin(w))}, "
            f"{float(np.nanmax(w))}] (or NaN/inf); fix data.edge_weight"
        )
    top = float(w.max())
    if top <= resolution * 1000 and np.array_equal(w, np.round(w)):
        out = w.astype(np.int64)
    else:
        out = np.rint(w * (resolution / max(top, 1e-300))).astype(np.int64)
    np.maximum(out, 1, out=out)
    return out


def _to_idx(arr: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """Cast to METIS's idx_t, failing clearly when values do not fit."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype == dtype:
        return arr
    info = np.iinfo(dtype)
    if arr.size and (int(arr.max()) > info.max or int(arr.min()) < info.min):
        raise PartitionError(
            f"expected {what} to fit METIS's {info.bits}-bit idx_t (max {info.max}), found "
            f"values up to {int(arr.max())}; the graph is too large for this METIS build, "
            "install a METIS built with IDXTYPEWIDTH=64"
        )
    return arr.astype(dtype)


def _ptr(arr: np.ndarray) -> ctypes.c_void_p:
    return arr.ctypes.data_as(ctypes.c_void_p)


def _partition_libmetis(
    lm: _LibMetis,
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    vw: np.ndarray | None,
    imbalance: float,
    seed: int,
    ew: np.ndarray | None = None,
    ncuts: int = 1,
    niter: int | None = None,
    recursive: bool = False,
) -> tuple[np.ndarray, int]:
    """METIS_PartGraphKway (or ...Recursive) through ctypes; returns (parts int64 [N], edgecut)."""
    n = indptr.shape[0] - 1
    idx = lm.idx_dtype
    ncon = 1 if vw is None else vw.shape[1]
    xadj = _to_idx(indptr, idx, "indptr (the number of adjacency entries)")
    adjncy = _to_idx(indices, idx, "indices (node ids)")
    vwgt = None
    if vw is not None:
        tot = vw.sum(axis=0)
        vwgt = _to_idx(vw.reshape(-1), idx, "vertex_weights")
        if int(tot.max()) > np.iinfo(idx).max:
            raise PartitionError(
                f"expected the total vertex weight to fit METIS's idx_t, found {int(tot.max())}; "
                "use smaller weights"
            )
    adjwgt = None if ew is None else _to_idx(ew, idx, "edge_weights")
    options = np.zeros(_METIS_NOPTIONS, dtype=idx)
    lm.lib.METIS_SetDefaultOptions(_ptr(options))
    opt = lm.options
    options[opt["SEED"]] = seed
    options[opt["UFACTOR"]] = max(1, int(round(imbalance * 1000)))
    options[opt["CONTIG"]] = 0
    options[opt["NUMBERING"]] = 0
    options[opt["NCUTS"]] = ncuts
    if niter is not None:
        options[opt["NITER"]] = niter
    ubvec = np.full(ncon, 1.0 + imbalance, dtype=lm.real_dtype)
    nvtxs = np.array([n], dtype=idx)
    ncon_a = np.array([ncon], dtype=idx)
    nparts = np.array([num_parts], dtype=idx)
    objval = np.zeros(1, dtype=idx)
    part = np.zeros(n, dtype=idx)
    entry = lm.lib.METIS_PartGraphRecursive if recursive else lm.lib.METIS_PartGraphKway
    status = entry(
        _ptr(nvtxs),
        _ptr(ncon_a),
        _ptr(xadj),
        _ptr(adjncy),
        None if vwgt is None else _ptr(vwgt),
        None,
        None if adjwgt is None else _ptr(adjwgt),
        _ptr(nparts),
        None,
        _ptr(ubvec),
        _ptr(options),
        _ptr(objval),
        _ptr(part),
    )
    if status != _METIS_OK:
        raise PartitionError(
            f"expected METIS_PartGraphKway to return METIS_OK (1), found "
            f"{_METIS_STATUS.get(status, 'unknown status')} ({status}) for a graph with {n} "
            f"nodes, {indices.shape[0] // 2} edges, {num_parts} parts and {ncon} constraint(s); "
            "check the input graph (symmetric, no self loops), try another imbalance, or free "
            "memory for METIS_ERROR_MEMORY"
        )
    return part.astype(np.int64), int(objval[0])


def _partition_pymetis(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    vw: np.ndarray | None,
    imbalance: float,
    seed: int,
    ew: np.ndarray | None = None,
    ncuts: int = 1,
    niter: int | None = None,
    recursive: bool = False,
) -> tuple[np.ndarray, int]:
    """pymetis fallback; honours only the first weight column."""
    try:
        import pymetis
    except ImportError as exc:  # pragma: no cover - pymetis is a hard dependency
        raise PartitionError(
            f"expected the METIS library or pymetis, found neither ({exc}); {_INSTALL_HINT} "
            "or `pip install pymetis`"
        ) from exc
    if vw is not None and vw.shape[1] > 1:
        logger.warning(
            "partitioning with pymetis (METIS shared library not found or backend='pymetis'), "
            "which ignores "
            "multi-constraint weights, so only the first balance constraint is enforced and "
            "training-node balance will NOT be enforced (%d constraints given). To fix it, %s.",
            vw.shape[1],
            _INSTALL_HINT,
        )
    opts = pymetis.Options()
    opts.seed = seed
    opts.ufactor = max(1, int(round(imbalance * 1000)))
    opts.contig = 0
    opts.ncuts = ncuts
    if niter is not None:
        opts.niter = niter
    vweights = None if vw is None else np.ascontiguousarray(vw[:, 0])
    eweights = None if ew is None else np.ascontiguousarray(ew)
    if hasattr(pymetis, "CSRAdjacency"):
        adjacency = pymetis.CSRAdjacency(indptr, indices)
        cut, parts = pymetis.part_graph(
            num_parts,
            adjacency,
            vweights=vweights,
            eweights=eweights,
            options=opts,
            recursive=recursive,
        )
    else:  # pragma: no cover - pymetis < 2025.2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cut, parts = pymetis.part_graph(
                num_parts,
                xadj=indptr,
                adjncy=indices,
                vweights=vweights,
                eweights=eweights,
                options=opts,
                recursive=recursive,
            )
    return np.asarray(parts, dtype=np.int64), int(cut)


def metis_partition(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    vertex_weights: np.ndarray | None = None,
    imbalance: float = 0.05,
    seed: int = 0,
    *,
    backend: str = "auto",
    edge_weights: np.ndarray | None = None,
    ncuts: int = 1,
    niter: int | None = None,
    recursive: bool = False,
) -> np.ndarray:
    """Partition an undirected graph into ``num_parts`` parts with k-way METIS.

    Args:
        indptr: int ``[N+1]``, CSR row pointer of a symmetric graph without self loops
            (see :func:`gnnscale.partitioning.graph.to_undirected_csr`).
        indices: int ``[2M]``, CSR neighbour ids.
        num_parts: P >= 1.
        vertex_weights: optional non-negative int ``[N]`` or ``[N, ncon]``; METIS keeps every
            column balanced across parts within ``imbalance``.
        imbalance: allowed relative overweight of a part, per constraint (0.05 = 5%).
        seed: METIS random seed (same seed + same input = same partition).
        backend: ``"auto"`` (the METIS library if found, else pymetis), ``"libmetis"`` or
            ``"pymetis"`` (only the first weight column is honoured).
        edge_weights: optional non-negative int ``[2M]``, the weight of every adjacency entry
            (symmetric: ``w(u, v) == w(v, u)``); METIS then minimizes the total weight of cut
            edges instead of their number. See :func:`integer_edge_weights` for real weights.
        ncuts: partitionings METIS computes, keeping the best (METIS_OPTION_NCUTS; cost grows
            linearly).
        niter: refinement iterations per level (METIS_OPTION_NITER; METIS's default 10).
        recursive: recursive bisection (METIS_PartGraphRecursive) instead of k-way.

    Returns:
        int64 numpy ``[N]`` with values in ``[0, P)``.
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.shape[0] < 1:
        raise PartitionError(
            f"expected indptr of shape [N+1], found shape {tuple(indptr.shape)}; "
            "build it with to_undirected_csr"
        )
    n = indptr.shape[0] - 1
    if indices.ndim != 1 or int(indptr[-1]) != indices.shape[0] or int(indptr[0]) != 0:
        raise PartitionError(
            f"expected indptr[0] == 0 and indptr[-1] == len(indices), found indptr[0]="
            f"{int(indptr[0])}, indptr[-1]={int(indptr[-1])}, len(indices)={indices.shape[0]}; "
            "build the CSR with to_undirected_csr"
        )
    num_parts = int(num_parts)
    if num_parts < 1:
        raise PartitionError(f"expected num_parts >= 1, found {num_parts}; pass a positive count")
    if backend not in BACKENDS:
        raise PartitionError(f"expected backend in {BACKENDS}, found {backend!r}")
    if not 0.0 <= float(imbalance) < 10.0:
        raise PartitionError(
            f"expected imbalance in [0, 10) (0.05 = 5% overweight allowed), found {imbalance}"
        )
    vw = _check_weights(vertex_weights, n)
    ew = _check_edge_weights(edge_weights, indices.shape[0])
    for name, value, low in (("ncuts", ncuts, 1), ("niter", niter, 1)):
        if value is not None and (isinstance(value, bool) or int(value) != value or value < low):
            raise PartitionError(f"expected an integer {name} >= {low}, found {value!r}")
    if num_parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if num_parts > n:
        raise PartitionError(
            f"expected num_parts <= number of nodes ({n}), found num_parts={num_parts}; "
            "use fewer parts"
        )
    if vw is not None:
        nonzero = vw.sum(axis=0) > 0
        if not nonzero.all():
            logger.info(
                "dropping %d all-zero balance constraint(s) (nothing to balance)",
                int((~nonzero).sum()),
            )
            vw = vw[:, nonzero] if nonzero.any() else None

    lm = find_libmetis() if backend in ("auto", "libmetis") else None
    if backend == "libmetis" and lm is None:
        raise PartitionError(
            f"expected the METIS shared library (libmetis.so.5), found none; {_INSTALL_HINT}"
        )
    if lm is not None:
        parts, cut = _partition_libmetis(
            lm, indptr, indices, num_parts, vw, imbalance, seed, ew, int(ncuts), niter, recursive
        )
        used = f"libmetis ({lm.path})"
    else:
        parts, cut = _partition_pymetis(
            indptr, indices, num_parts, vw, imbalance, seed, ew, int(ncuts), niter, recursive
        )
        used = "pymetis"
    if parts.shape[0] != n or (n and (int(parts.min()) < 0 or int(parts.max()) >= num_parts)):
        raise PartitionError(
            f"expected METIS to return {n} part ids in [0, {num_parts}), found "
            f"{parts.shape[0]} ids in [{int(parts.min())}, {int(parts.max())}]; "
            "this is a METIS bug, try another seed"
        )
    logger.debug("METIS via %s: %d parts, edge cut %d", used, num_parts, cut)
    return parts
