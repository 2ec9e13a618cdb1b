"""A small synthetic stand-in for PyG's MovieLens as a typed temporal graph (docs/temporal.md section 4):
users rate movies at times, as ``torch_geometric.datasets.MovieLens`` lays the graph out, so PyG's
temporal link example runs where MovieLens cannot be downloaded (examples/pyg_upstream).

The ratings carry a signal a model can learn: each user and movie has a latent taste vector (its
features are that vector plus noise) and a rating is the rounded affinity of the two, moved by a
slow drift with time; the times are spread over ``span``.
"""
from __future__ import annotations

import torch
from torch_geometric.data import HeteroData


def generate_temporal_ratings(num_users: int = 300, num_movies: int = 200, num_ratings: int = 6000, dim: int = 16,
                              span: int = 1_000_000, genres: int = 4, seed: int = 0) -> HeteroData:
    """A ``HeteroData`` like PyG's MovieLens: ``user`` (``x`` float32 [U, dim]), ``movie`` (``x`` float32
    [M, dim], ``y`` a genre id per movie: the typed partition's target type), ``('user', 'rates', 'movie')``
    with ``edge_index``, ``edge_label`` (int64 ratings 0..5) and ``time`` (int64 in [0, span)); a pair
    may be rated more than once (each rating an event)."""
    g = torch.Generator().manual_seed(seed)
    taste_u = torch.randn(num_users, dim, generator=g)
    taste_m = torch.randn(num_movies, dim, generator=g)
    users = torch.randint(0, num_users, (num_ratings,), generator=g)
    movies = torch.randint(0, num_movies, (num_ratings,), generator=g)
    time = torch.sort(torch.randint(0, span, (num_ratings,), generator=g)).values
    affinity = (taste_u[users] * taste_m[movies]).sum(1) / dim ** 0.5
    drift = 0.5 * (time.double() / span - 0.5)  # tastes move with time
    rating = (2.5 + 1.5 * affinity + drift).round().clamp(0, 5).to(torch.int64)
    data = HeteroData()
    data["user"].x = taste_u + 0.3 * torch.randn(num_users, dim, generator=g)
    data["movie"].x = taste_m + 0.3 * torch.randn(num_movies, dim, generator=g)
    data["movie"].y = taste_m[:, :genres].argmax(1)
    rel = data["user", "rates", "movie"]
    rel.edge_index = torch.stack([users, movies])
    rel.edge_label = rating
    rel.time = time
    return data
