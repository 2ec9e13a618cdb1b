"""ACM (HAN / HeCo preparation): papers, authors and subjects; papers are classified into 3 areas.

Name: ``acm:PATH`` (a relative PATH is taken relative to ``root`` when given), option
``split`` in {20, 40, 60} (labelled papers per class for training; default 20).

Files in PATH (as in HeCo's ``data/acm``; see ``../shared/data/acm/README.md``)::

    labels.npy                     float/int [4019]      class of each paper (0, 1, 2)
    p_feat.npz                     scipy CSR [4019, F]   paper features (bag of words)
    a_feat.npz                     scipy CSR [7167, F]   author features
    pa.txt                         "paper author" per line, 0-based
    ps.txt                         "paper subject" per line, 0-based
    train_K.npy, val_K.npy, test_K.npy   int paper ids, K = 20, 40, 60

The typed ``Data`` (docs/typed_graphs.md section 1): node types ``paper`` (4019, features
dense float32 [4019, 1902]), ``author`` (7167, features [7167, 1902]), ``subject`` (60 = the
largest subject id + 1, no features); relations ``('paper', 'written_by', 'author')``,
``('author', 'writes', 'paper')`` (13,407 edges each), ``('paper', 'has_subject', 'subject')``,
``('subject', 'subject_of', 'paper')`` (4,019 each). Target type ``paper``, 3 classes,
masks from ``train_K`` / ``val_K`` / ``test_K``.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import numpy as np
from torch_geometric.data import Data

from gnnscale.datasets._options import Option, data_folder
from gnnscale.datasets.typed import make_typed_data
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

SPLITS = (20, 40, 60)
NUM_CLASSES = 3
OPTIONS: dict[str, Option] = {
    "split": Option(int, 20, "labelled papers per class for training: 20, 40 or 60 (files train_K/val_K/test_K.npy)"),
}
HELP = (
    "acm:PATH\n"
    "    ACM typed graph (HAN/HeCo files: labels.npy, p_feat.npz, a_feat.npz, pa.txt, ps.txt,\n"
    "    train_K/val_K/test_K.npy): paper 4019 / author 7167 / subject 60 nodes, relations\n"
    "    paper-written_by-author, author-writes-paper, paper-has_subject-subject,\n"
    "    subject-subject_of-paper; target paper, 3 classes. Options:"
)


def _need(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(
            f"expected the ACM file {path.name} in {path.parent}, found no such file; the folder must hold "
            "labels.npy, p_feat.npz, a_feat.npz, pa.txt, ps.txt and train_K/val_K/test_K.npy (HeCo's data/acm)"
        )
    return path


def _sparse(path: Path) -> np.ndarray:
    import scipy.sparse as sp

    try:
        m = sp.load_npz(_need(path))
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"expected a scipy sparse matrix (scipy.sparse.save_npz) in {path}, could not read it "
                           f"({exc}); restore the file") from None
    return np.asarray(m.toarray(), dtype=np.float32)


def _pairs(path: Path) -> np.ndarray:
    try:
        arr = np.loadtxt(_need(path), dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise DatasetError(f"expected integer pairs 'a b' per line in {path}, could not parse them ({exc}); "
                           "restore the file") from None
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DatasetError(f"expected two ids per line in {path}, found shape {arr.shape}; restore the file")
    return arr.T  # [2, E]


def _ids(path: Path) -> np.ndarray:
    try:
        arr = np.load(_need(path), allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise DatasetError(f"expected a NumPy .npy array in {path}, could not read it ({exc}); restore the file") from None
    return np.asarray(arr).reshape(-1)


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``acm:<arg>``; see the module docstring."""
    folder = data_folder(arg, root, "the ACM folder (labels.npy, p_feat.npz, a_feat.npz, pa.txt, ps.txt, ...)",
                         "acm")
    k = options["split"]
    if k not in SPLITS:
        raise DatasetError(f"expected option split in {list(SPLITS)} for acm, found {k}; pass split=20, 40 or 60")
    labels = np.load(_need(folder / "labels.npy"), allow_pickle=False)
    p_feat = _sparse(folder / "p_feat.npz")
    a_feat = _sparse(folder / "a_feat.npz")
    pa = _pairs(folder / "pa.txt")
    ps = _pairs(folder / "ps.txt")
    n_paper, n_author = int(np.asarray(labels).reshape(-1).shape[0]), a_feat.shape[0]
    n_subject = int(ps[1].max()) + 1 if ps.size else 0
    data = make_typed_data(
        num_nodes={"paper": n_paper, "author": n_author, "subject": n_subject},
        edges=[
            (("paper", "written_by", "author"), pa),
            (("author", "writes", "paper"), pa[::-1]),
            (("paper", "has_subject", "subject"), ps),
            (("subject", "subject_of", "paper"), ps[::-1]),
        ],
        target_type="paper",
        y=labels,
        x_dict={"paper": p_feat, "author": a_feat},
        train=_ids(folder / f"train_{k}.npy"),
        val=_ids(folder / f"val_{k}.npy"),
        test=_ids(folder / f"test_{k}.npy"),
        name=name,
        num_classes=NUM_CLASSES,
        where=str(folder),
    )
    logger.info(
        "loaded %s: paper %d, author %d, subject %d nodes; %d edges in %d relations; split %d/%d/%d",
        name, n_paper, n_author, n_subject, data.edge_index.shape[1], len(data.edge_types),
        int(data.train_mask.sum()), int(data.val_mask.sum()), int(data.test_mask.sum()),
    )
    return data
