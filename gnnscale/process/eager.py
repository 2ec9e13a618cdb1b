"""Keep ``torch._dynamo`` off a worker's start-up path.

torch wraps a few eager functions with ``torch._disable_dynamo`` (the optimizer's
``add_param_group``, ``zero_grad``, ``state_dict``, ``load_state_dict``, the functional Adam,
DDP's ``_inside_ddp_forward``): on its first call such a wrapper imports ``torch._dynamo``
(2-3 s on 2 cores with torch 2.13) only to build a "do not trace this" guard, which does
nothing outside ``torch.compile``; and ``Adam.step`` is wrapped by ``_use_grad_for_differentiable``,
which imports it to place two graph breaks around a ``no_grad`` step. gnnscale's workers never
compile, so :func:`stay_eager` gives each wrapped function its own original as the cached guard
(the attribute the wrapper looks for before importing), and :func:`adam` builds torch's Adam
whose step runs the undecorated ``Adam.step`` under ``torch.no_grad()`` (the same arithmetic:
the decorator's grad mode is ``defaults["differentiable"]``, False here). The first step then
no longer imports the compiler.

DDP's constructor reads one setting of the compiler itself (torch 2.13:
``torch._dynamo.utils.get_optimize_ddp_mode()``, whether to use the compiler's Python reducer),
so :func:`ddp` builds DDP with a stand-in ``torch._dynamo`` in ``sys.modules`` for the length of
the constructor only, answering ``"ddp_optimizer"``: the value of the compiler's default
``optimize_ddp = True`` (the C++ reducer, as always outside ``torch.compile``). No worker then
imports the compiler: a single worker, the pipeline stages and a data-parallel group alike.

It does nothing when ``torch._dynamo`` is already imported (someone compiles in this process),
or when ``GNNSCALE_KEEP_DYNAMO=1`` is set.
"""
from __future__ import annotations

import os
import sys
import types

import torch

_DONE = False


def _wrapped_originals() -> list:
    """The original functions behind torch's ``_disable_dynamo`` wrappers that a step calls."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.optim import adam, adamw, optimizer, sgd

    found = []
    for owner, names in ((optimizer.Optimizer, ("add_param_group", "zero_grad", "state_dict", "load_state_dict")),
                         (DistributedDataParallel, ("_inside_ddp_forward",)),
                         (adam, ("adam",)), (adamw, ("adamw",)), (sgd, ("sgd",))):
        for name in names:
            fn = getattr(owner, name, None)
            original = getattr(fn, "__wrapped__", None)
            # the innermost function: DDP's is a context manager around the dynamo wrapper
            while callable(getattr(original, "__wrapped__", None)):
                original = original.__wrapped__
            if callable(original):
                found.append(original)
    del torch
    return found


def stay_eager() -> bool:
    """Let torch's dynamo-disable wrappers call their functions directly (see the module
    docstring). Returns whether it did (idempotent)."""
    global _DONE
    if _DONE:
        return True
    if "torch._dynamo" in sys.modules or os.environ.get("GNNSCALE_KEEP_DYNAMO") == "1":
        return False
    for original in _wrapped_originals():
        # torch._compile._disable_dynamo's wrapper calls ``fn.__dynamo_disable`` when set
        setattr(original, "__dynamo_disable", original)
    _DONE = True
    return True


class _EagerAdam(torch.optim.Adam):
    """torch's Adam, stepping without the compiler's graph breaks (see the module docstring)."""

    _plain_step = getattr(torch.optim.Adam.step, "__wrapped__", None)

    def step(self, closure=None):  # noqa: D102 - torch.optim.Adam.step
        if self._plain_step is None or self.defaults.get("differentiable"):
            return super().step(closure)
        with torch.no_grad():
            return self._plain_step(closure)


def param_groups(named, weight_decay, names=None) -> list[dict]:
    """Adam's parameter groups of ``--weight-decay`` (see :func:`gnnscale.config.parse_weight_decay`).

    Args:
        named: ``(name, parameter)`` pairs: the parameters to step (``module.named_parameters()``).
        weight_decay: a number, ``"PREFIX=DECAY,..."`` or a mapping.
        names: every parameter name of the whole model, against which the prefixes are checked
            (a pipeline stage steps only its share; default: the names of ``named``).

    Returns:
        ``[{"params": [...], "weight_decay": d}, ...]``: one group per distinct decay, in the
        order of the parameters' first appearance (one group for a plain number).

    Raises:
        OptionError: a prefix that names no parameter of the model, with the model's prefixes.
    """
    from gnnscale.config import OptionError, parse_weight_decay

    rest, groups = parse_weight_decay(weight_decay)
    named = list(named)
    names = [n for n, _ in named] if names is None else list(names)
    unknown = [k for k in groups if not any(n == k or n.startswith(k + ".") for n in names)]
    if unknown:
        tops = list(dict.fromkeys(n.split(".")[0] for n in names))
        deeper = next((n.rsplit(".", 1)[0] for n in names if n.count(".") >= 2), "convs.0")
        raise OptionError(f"--weight-decay names the prefix{'es' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}, which match{'' if len(unknown) > 1 else 'es'} no "
                          f"parameter of the model; its prefixes are {', '.join(tops)} (or a longer leading part of "
                          f"a parameter's name, e.g. {deeper}); pass e.g. "
                          f"--weight-decay {'convs' if 'convs' in tops else tops[0] if tops else 'convs'}=0.01,5e-4")
    by_decay: dict[float, list] = {}
    for name, p in named:
        keys = [k for k in groups if name == k or name.startswith(k + ".")]
        by_decay.setdefault(groups[max(keys, key=len)] if keys else rest, []).append(p)
    return [{"params": ps, "weight_decay": d} for d, ps in by_decay.items()]


def adam(params, lr: float, weight_decay: float | str | dict = 0.0, names=None) -> torch.optim.Optimizer:
    """torch's Adam over ``params``; when :func:`stay_eager` applied, one whose step does not
    import ``torch._dynamo`` (identical updates).

    ``weight_decay`` by parameter-name prefix (``"convs=0.01,5e-4"``) needs ``params`` as
    ``(name, parameter)`` pairs (``named_parameters()``) and builds :func:`param_groups`
    (``names``: the whole model's, where ``params`` are a pipeline stage's share); a number
    decays every parameter alike."""
    from gnnscale.config import parse_weight_decay

    params = list(params)
    rest, groups = parse_weight_decay(weight_decay)
    named = bool(params) and isinstance(params[0], tuple)
    if groups and not named:
        raise TypeError("adam: a weight decay by prefix needs the parameters with their names (named_parameters())")
    if groups:
        params, weight_decay = param_groups(params, weight_decay, names), 0.0
    else:
        params, weight_decay = ([p for _, p in params] if named else params), rest
    # foreach: a few multi-tensor ops over all parameters instead of about ten ops per parameter
    # (torch's default on the CPU); the same arithmetic, updates equal bit for bit. Each op of
    # the per-parameter loop is a parallel region of its own. R-MAT 100k's model (9 tensors), a
    # step, medians of 190, machine loaded by other jobs: 1 thread 0.86 -> 0.75 ms; 2 threads
    # 0.83 -> 0.75 ms with idle OpenMP threads sleeping, 259 -> 1.0 ms with them spinning (a lone
    # worker's setting)
    cls = _EagerAdam if _DONE else torch.optim.Adam
    return cls(params, lr=lr, weight_decay=weight_decay, foreach=True)


def ddp(module: torch.nn.Module, **kwargs) -> torch.nn.parallel.DistributedDataParallel:
    """``DistributedDataParallel(module, **kwargs)``; when :func:`stay_eager` applied and the
    compiler is not imported, built without importing it (see the module docstring)."""
    from torch.nn.parallel import DistributedDataParallel

    if not _DONE or "torch._dynamo" in sys.modules:
        return DistributedDataParallel(module, **kwargs)
    stand_in = types.ModuleType("torch._dynamo")
    stand_in.utils = types.SimpleNamespace(get_optimize_ddp_mode=lambda: "ddp_optimizer")
    sys.modules["torch._dynamo"] = stand_in
    model = None
    try:
        model = DistributedDataParallel(module, **kwargs)
    except AttributeError:  # a torch whose constructor reads more of the compiler: build it as torch does
        pass  # (every rank alike: the same torch, the same constructor)
    finally:
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if torch.__dict__.get("_dynamo") is stand_in:
            del torch._dynamo
    return model if model is not None else DistributedDataParallel(module, **kwargs)
