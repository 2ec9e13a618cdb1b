"""Training: the trainer (the loop), metrics (the one schema), checkpoints, the model file, embed."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {"train_worker": ".trainer", "load_model": ".model_io"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
