"""The data path of a step: the feature store and its cache, in-degrees, the prefetching thread."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {
    "DistFeatureStore": ".feature_store", "FeatureCache": ".feature_cache", "CacheSize": ".feature_cache",
    "DegreeStore": ".degrees", "Prefetcher": ".prefetch",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
