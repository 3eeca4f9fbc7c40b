"""A target trained over several training seeds: the pipeline's figure, not one draw of it (issue 26).

Two models that differ only in their training seed can give very different
figures (the issue measured a pin ranked 1st by seeds 0-2 and 14th by seed
12), so a gate on one model flags noise or misses a regression.
:func:`train_target_seeds` and :func:`train_own_model_seeds` train the same
target with seeds ``s, s+1, ..., s+k-1``, each through the ordinary
``train_target`` / ``train_own_model`` call (so each is cached once per content
hash and a warm run loads all ``k``), and return a :class:`SeedModels`. Every
``assert_*`` / ``measure_*`` helper given a ``SeedModels`` measures each member
and aggregates (:mod:`pytest_privleak.attacks.over_seeds`).

Under xdist, worker ``gwN`` of ``n`` trains the seeds in an order rotated to
start at seed index ``N * k // n``, so workers whose tests need the same ``k``
models start at seeds spread evenly over them and load the others from the
cache (the cache's lease makes a second worker wait for, not repeat, a
training under way). An own model's seeds, which no batch holds, are first
spread over processes (:func:`.parallel.prefetch`): this process's cores
without xdist, the workers that have run out of tests under xdist.
"""
from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["SeedModels", "SeedIgnoredWarning", "OneDrawWarning", "check_seed_count", "train_over_seeds",
           "train_target_seeds", "train_own_model_seeds"]


class SeedIgnoredWarning(UserWarning):
    """The ``k`` models trained with different seeds are identical: the training function ignores its seed."""


class OneDrawWarning(UserWarning):
    """A :class:`SeedModels` was used as one model: the first seed's model answered, so what it gave is one draw."""


def check_seed_count(seeds: Any, what: str = "seeds") -> int:
    """``seeds`` as an int >= 1, else ``ValueError`` naming ``what`` and the fix."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"{what}={seeds!r} must be an integer >= 1 (the number of training seeds, each a model "
                         "trained once); fix: seeds=1 for one draw, seeds=7 (the plugin's default) for a figure "
                         "that holds across retrains")
    return int(seeds)


class SeedModels(Sequence):
    """``k`` trained targets that differ only in their training seed, in seed order.

    A read-only sequence (not a list or tuple, so no attack mistakes it for an
    ensemble of targets); ``seeds`` holds the training seed of each member and
    ``name`` what trained them (named in messages and warnings).

    With ``--privleak-seeds k > 1`` every ``train_target`` returns one, so code
    written for one model keeps working: a public attribute it does not have
    (``model.predict``, ``model.labels``, ``model.describe()``) is the first
    seed's model's, with an :class:`OneDrawWarning` once per object saying that
    what it gives is one draw. Calling it calls the first seed's model the same
    way. The ``assert_*`` / ``measure_*`` helpers of ``pytest_privleak`` judge
    every member instead; ``models[i]`` and iteration give the members.
    """

    def __init__(self, models: Sequence[Any], seeds: Sequence[int], name: str = "") -> None:
        if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise TypeError(f"SeedModels seeds= must be a list of integer training seeds, one per model, got "
                            f"{seeds!r}; fix: e.g. seeds=[0, 1, 2]")
        models, seeds = list(models), [int(s) for s in seeds]
        if not models:
            raise ValueError("SeedModels needs at least one model; fix: train with seeds=k, k >= 1")
        if len(models) != len(seeds):
            raise ValueError(f"SeedModels got {len(models)} model(s) but {len(seeds)} seed(s); give one seed per model")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"SeedModels seeds {seeds} repeat a seed; each member must have its own training seed")
        self._models, self.seeds, self.name = tuple(models), tuple(seeds), name

    def __len__(self) -> int:
        return len(self._models)

    def __getitem__(self, index):
        return self._models[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._models)

    def __repr__(self) -> str:
        return f"SeedModels({self.name or 'targets'}, seeds={list(self.seeds)})"

    def _as_one(self, what: str) -> Any:
        """The first seed's model, warning once that it stands for all ``k``."""
        if len(self._models) > 1 and not self.__dict__.get("_warned"):
            self.__dict__["_warned"] = True
            warnings.warn(OneDrawWarning(
                f"{self!r} used as one model ({what}): the model of training seed {self.seeds[0]} answered, so what "
                f"it gives is one draw of {len(self._models)}; the pytest_privleak assert_*/measure_* helpers judge "
                "every seed: pass the SeedModels to them, or take one model with models[i] (or train one with "
                "seeds=1)"), stacklevel=3)
        return self._models[0]

    def __getattr__(self, name: str) -> Any:
        # only names the object lacks reach here; private and special names are never forwarded, so
        # protocol checks, copy and numpy see a sequence, not the first model
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self._as_one(f"attribute {name!r}"), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._as_one("called")(*args, **kwargs)


def _weights_digest(model: Any) -> str | None:
    """SHA-256 of a model's weights (a torch module, or an adapter holding one), or None when none is found."""
    import torch

    module = model if isinstance(model, torch.nn.Module) else None
    if module is None:
        for value in vars(model).values() if hasattr(model, "__dict__") else ():
            if isinstance(value, torch.nn.Module):
                module = value
                break
    if module is None:
        return None
    digest = hashlib.sha256()
    for key, tensor in sorted(module.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return digest.hexdigest()


def _worker_offset(k: int) -> int:
    """Where this xdist worker's training order starts (0 outside xdist): worker ``N`` of ``n`` at seed index
    ``N * k // n``, so ``n`` workers that need the same ``k`` models start evenly spread over them and each
    trains about ``k / n`` before meeting models another has trained (starting at ``N`` instead put two
    workers one seed apart, each then waiting on the seed the other was training)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    digits = worker[2:] if worker.startswith("gw") else ""
    if not digits.isdigit():
        return 0
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    n = int(count) if count.isdigit() and int(count) > int(digits) else int(digits) + 1
    return (int(digits) * k // n) % k if n <= k else int(digits) % k


def train_over_seeds(train_one: Callable[[int], Any], seeds: int, *, seed: int = 0, name: str = "target") -> SeedModels:
    """``train_one(s)`` for ``s = seed .. seed+seeds-1`` as a :class:`SeedModels`; warns if all come out the same.

    ``name`` names the training function in the warning.
    """
    k = check_seed_count(seeds)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed={seed!r} must be an integer (the first training seed)")
    from ..progress import events as progress

    order = [seed + (i + _worker_offset(k)) % k for i in range(k)]
    trained = {}
    for s in order:
        with progress.part(f"seed {s - seed + 1} of {k}"):   # each training line says which seed it is
            trained[s] = train_one(s)
    members = [trained[s] for s in range(seed, seed + k)]
    if k > 1:
        digests = {_weights_digest(m) for m in members}
        if len(digests) == 1 and None not in digests:
            warnings.warn(SeedIgnoredWarning(
                f"{name}: the {k} models trained with seeds {seed}..{seed + k - 1} have identical weights, so the "
                "training function ignores its seed and the figures over seeds are one draw repeated; fix: seed "
                "the model's initialisation and data order with the seed argument it is given (do not call "
                "torch.manual_seed with a constant inside it)"), stacklevel=3)
    return SeedModels(members, list(range(seed, seed + k)), name=name)


def train_target_seeds(kind: str, dataset: Any, *, seeds: int, seed: int = 0, device: str = "cpu", cache=None,
                       **config: Any) -> SeedModels:
    """The built-in target ``kind`` trained with ``seeds`` training seeds (see :func:`..train_target`).

    The kinds of :data:`..STACKED` train the seeds missing from the cache as
    one stacked training (:func:`..train_targets`; under xdist two, the second
    for a worker out of tests: :func:`.parallel.spread_stack`), the others one
    after another.
    """
    from . import STACKED, train_target, train_targets

    if kind in STACKED:
        k = check_seed_count(seeds)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed={seed!r} must be an integer (the first training seed)")
        from .parallel import spread_stack

        spread_stack(kind, dataset, range(seed, seed + k), device=device, cache=cache, config=config)
        models = train_targets(kind, [(dataset, s) for s in range(seed, seed + k)], device=device, cache=cache,
                               **config)
        return SeedModels(models, list(range(seed, seed + k)), name=f"train_target({kind!r})")
    return train_over_seeds(lambda s: train_target(kind, dataset, device=device, cache=cache, seed=s, **config),
                            seeds, seed=seed, name=f"train_target({kind!r})")


def train_own_model_seeds(train: Callable[..., Any], dataset: Any, *, seeds: int, seed: int = 0,
                          **options: Any) -> SeedModels:
    """Your own model (see :func:`.own_model.train_own_model`) trained with ``seeds`` training seeds."""
    from .own_model import train_own_model
    from .parallel import OwnTraining, prefetch

    label = f"{getattr(train, '__module__', '?')}:{getattr(train, '__qualname__', repr(train))}"
    k = check_seed_count(seeds)
    made: dict[int, Any] = {}
    if k > 1 and isinstance(seed, int) and not isinstance(seed, bool) and "build" in options:
        known = {name: options[name] for name in ("wrap", "cache", "device", "sources", "name") if name in options}
        config = {n: v for n, v in options.items() if n not in known and n != "build"}
        order = [seed + (i + _worker_offset(k)) % k for i in range(k)]
        trained = prefetch([OwnTraining(train, dataset, options["build"], seed=s, config=config,
                                        part=f"seed {s - seed + 1} of {k}", **known)
                            for s in order], what=f"the {k} seeds of train_own_model({label})")
        made = {order[i]: model for i, model in trained.items()}

    def one(s: int) -> Any:
        return made.pop(s) if s in made else train_own_model(train, dataset, seed=s, **options)

    return train_over_seeds(one, seeds, seed=seed, name=f"train_own_model({label})")
