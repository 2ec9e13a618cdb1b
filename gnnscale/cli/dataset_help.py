"""The text ``gnnscale datasets`` prints, here so that the command prints it without importing
torch (``gnnscale.datasets`` imports torch_geometric: 8 s for static text).

It is :data:`gnnscale.datasets.DATASET_HELP`, copied: ``tests/test_cli_checks.py`` checks that the
two are the same; after a change to a dataset's help, rewrite this file with
``python -m gnnscale.cli.dataset_help``.
"""
from __future__ import annotations

LINES = (
    'Datasets: NAME or NAME?key=value&key2=value2 (values are parsed as int, float, true/false or text; root=DIR may be given the same way).',
    'Every dataset gives x float32 [N,F], y int64 [N] (-1 = unlabelled), edge_index int64 [2,E] (no duplicates), bool train/val/test masks.',
    'Other targets (docs/targets_and_edge_features.md): data.target_kind binary (int64 0/1), multilabel',
    '(y float32 [N,C] of 0/1: humloc, ogbn-proteins) or regression (float y); edge features as',
    'edge_attr float32 [E,De] aligned with edge_index (humloc, ogbn-proteins, dir: edge_attr.npy).',
    'Typed (heterogeneous) graphs (acm, hetero-dir, synthetic-mag, ogbn-mag) give instead node_types,',
    'edge_types [(src, rel, dst)], type_ptr, node_type, edge_type, x_dict {type: float32 [N_t,F_t]}, x=None,',
    'y (-1 off the target type), masks on target_type nodes (docs/typed_graphs.md).',
    '',
    'planetoid:cora | planetoid:citeseer | planetoid:pubmed (aliases cora, citeseer, pubmed)',
    '    Planetoid citation graphs with the public split (PyG Planetoid). root = folder with the raw',
    '    ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index} files (or its parent with raw/); default',
    '    $GNNSCALE_DATA/planetoid, $GNNSCALE_DATA, ./data/planetoid, ./data. Options:',
    "    normalize (str, default none): none (PyG's raw 0/1 rows) or row: each node's features divided by their sum, as the GCN and GCNII reference code preprocess them (rows of zeros stay zeros)",
    '',
    'npz:PATH',
    '    One .npz file, layout detected from its keys: gnn-benchmark (adj_*, attr_* or attr_matrix,',
    '    labels; symmetrized; Shchur split 20/30 per class, rest test) or heterophilous-graphs',
    '    (node_features, node_labels, edges [E,2], train/val/test_masks [S,N]). Files judged by ROC-AUC',
    '    (tolokers, minesweeper, questions) load as binary targets (target_kind binary). Options:',
    '    split (int, default 0): heterophilous layout: which of the stored splits (row of *_masks)',
    '    seed (int, default 0): gnn-benchmark layout: seed of the per-class random split',
    '    train_per_class (int, default 20): gnn-benchmark layout: train nodes per class',
    '    val_per_class (int, default 30): gnn-benchmark layout: val nodes per class',
    '    target (str, default auto): auto (binary for tolokers, minesweeper, questions: ROC-AUC), class or binary',
    '',
    'dir:PATH',
    '    A folder with edge_index.npy (int [2,E] or [E,2]), x.npy [N,F], y.npy [N] (negative =',
    '    unlabelled; or a multi-hot int/float [N,C] -> multilabel, float [N,D] -> regression), optional',
    '    edge_attr.npy (float [E,De], row i = edge i), edge_time.npy (int [E]: a temporal graph,',
    '    docs/temporal.md) and split.npz (train_mask/val_mask/test_mask or',
    '    train_idx/val_idx/test_idx); without split.npz a seeded 60/20/20 random split. Options:',
    '    undirected (bool, default False): store every edge in both directions',
    '    seed (int, default 0): seed of the random split (used only without split.npz)',
    '    train_frac (float, default 0.6): train fraction of the random split',
    '    val_frac (float, default 0.2): val fraction of the random split (test = the rest)',
    '',
    'humloc:PATH | humloc',
    '    HumLoc protein graph (folder with edge_list.csv, features.csv, labels.csv, split.pt; plain',
    "    'humloc' = ROOT/humloc, $GNNSCALE_DATA/humloc or ../shared/data/humloc): 3,106 proteins,",
    '    32 features, 14 labels (multilabel: y float32 [N,14]), 18,496 directed edges as stored',
    '    (self loops kept, exact duplicates dropped) with edge_attr float32 [E,21]; split 1675/187/1244.',
    '',
    'ogbn-arxiv | ogbn-products | ogbn-papers100M | ogbn-mag | any single-task ogbn-*',
    '    OGB node property prediction via ogb.nodeproppred (pip install ogb); root = OGB',
    '    root (default $GNNSCALE_DATA or ./data), dataset folder ROOT/ogbn_<name>/; files already',
    '    there are used offline. Symmetrized; NaN labels -> -1; OGB split. Heterogeneous ones',
    '    (ogbn-mag) load as typed graphs: target = the labelled type (paper), reverse relations',
    '    rev_<rel> added when undirected. ogbn-proteins: multilabel y float32 [N,112], x [N,0],',
    '    edge_attr [E,8] (both directions as ogb gives them), node_species, species split. Options:',
    '    download (bool, default True): download through ogb when the dataset folder does not exist',
    '    download_timeout (float, default 10.0): seconds to wait for the download server before giving up',
    '    undirected (bool, default True): store every edge in both directions (typed: add rev_<rel> relations)',
    '',
    'ogbl-collab | ogbl-ppa | ogbl-ddi | ogbl-citation2',
    '    OGB link property prediction via ogb.linkproppred (pip install ogb); root = OGB root',
    '    (default $GNNSCALE_DATA or ./data), dataset folder ROOT/ogbl_<name>/; files already there are',
    '    used offline. edge_index = the train edges with their reverses (message passing); data.link_split',
    "    = OGB's split (hits@K negatives, or citation2's 1000 negatives per source for MRR); no node",
    '    labels (y = -1, num_classes 0); ogbl-ddi gets a constant 1-column x. Options:',
    '    download (bool, default True): download through ogb when the dataset folder does not exist',
    '    download_timeout (float, default 10.0): seconds to wait for the download server before giving up',
    '',
    'synthetic',
    '    Planted-community graph with power-law degrees, class-correlated Gaussian features and a',
    '    random split; fully vectorized (1M nodes x degree 20 in seconds). Options:',
    '    num_nodes (int, default 20000): number of nodes N',
    '    avg_degree (float, default 10.0): average (directed) degree, edges = N * avg_degree',
    '    num_classes (int, default 8): number of classes = planted communities',
    '    num_features (int, default 64): feature dimension F',
    '    homophily (float, default 0.8): expected fraction of edges inside a community',
    '    train_frac (float, default 0.3): fraction of nodes in the train mask',
    '    val_frac (float, default 0.2): fraction of nodes in the val mask (test = the rest)',
    '    feature_noise (float, default 0.75): std of the feature noise (centroid norm ~1)',
    '    power_law_exponent (float, default 2.5): degree power-law exponent (> 2)',
    '    seed (int, default 0): random seed; equal seeds give equal graphs',
    '',
    'acm:PATH',
    '    ACM typed graph (HAN/HeCo files: labels.npy, p_feat.npz, a_feat.npz, pa.txt, ps.txt,',
    '    train_K/val_K/test_K.npy): paper 4019 / author 7167 / subject 60 nodes, relations',
    '    paper-written_by-author, author-writes-paper, paper-has_subject-subject,',
    '    subject-subject_of-paper; target paper, 3 classes. Options:',
    '    split (int, default 20): labelled papers per class for training: 20, 40 or 60 (files train_K/val_K/test_K.npy)',
    '',
    'hetero-dir:PATH',
    '    A typed graph folder: meta.json {"target_type": T}, nodes/<type>/x.npy [N_t,F_t] (or',
    '    num_nodes.txt when the type has no features), nodes/<T>/y.npy [N_T] (negative = unlabelled),',
    '    optional nodes/<T>/split.npz, edges/<src>__<rel>__<dst>/edge_index.npy int [2,E] in per-type',
    '    ids. Without split.npz a seeded 60/20/20 split of the labelled target nodes. Options:',
    '    undirected (bool, default False): add a reverse relation rev_<rel> for each relation without one',
    '    seed (int, default 0): seed of the random split (used only without nodes/<target>/split.npz)',
    '    train_frac (float, default 0.6): train fraction of the random split',
    '    val_frac (float, default 0.2): val fraction of the random split (test = the rest)',
    '',
    'synthetic-mag',
    '    Generated typed graph shaped like ogbn-mag: paper/author/institution/field_of_study in',
    "    ogbn-mag's proportions, relations writes/cites/has_topic/affiliated_with with its degrees",
    '    (power-law), planted communities, features on papers only, time-split proportions; the',
    '    full size (num_nodes=1939743) in seconds. Options:',
    '    num_nodes (int, default 100000): total nodes of the four types (ogbn-mag: 1939743)',
    '    num_features (int, default 128): paper feature dimension F (only papers have features)',
    '    num_classes (int, default 16): paper classes = planted communities',
    "    homophily (float, default 0.8): probability that an edge's target is in its source's community",
    '    feature_noise (float, default 1.0): std of the paper feature noise (centroid norm ~1)',
    '    power_law_exponent (float, default 2.5): degree power-law exponent (> 2)',
    '    undirected (bool, default True): add the reverse relations rev_writes, rev_cites, rev_has_topic, rev_affiliated_with',
    '    seed (int, default 0): random seed; equal seeds give equal graphs',
    '',
    'events:PATH',
    "    A text file of timestamped events 'src dst t' (one per line, whitespace-separated, as SNAP's",
    '    CollegeMsg): a temporal graph (edge_time int64 [E], repeated pairs kept, ids renumbered 0..N-1).',
    'jodie:PATH',
    "    JODIE's CSV (user,item,timestamp,state_label,features...): users then items, edge features and",
    '    times; docs/temporal.md. Options (both):',
    '    undirected (bool, default False): also store every event reversed (same time)',
    '    sorted (bool, default False): the file claims its events are in time order: checked, one line if not',
)

TEXT = "\n".join(LINES) + "\n"


def _write() -> None:
    from pathlib import Path

    from gnnscale.datasets import DATASET_HELP

    path = Path(__file__)
    lines = path.read_text().split("\n")
    start, end = lines.index("LINES = ("), lines.index(")")
    body = [f"    {line!r}," for line in DATASET_HELP.rstrip("\n").split("\n")]
    path.write_text("\n".join(lines[:start + 1] + body + lines[end:]))


if __name__ == "__main__":
    _write()
