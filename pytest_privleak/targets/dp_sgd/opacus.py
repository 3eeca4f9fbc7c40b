"""DP-SGD training of the built-in targets through Opacus (an optional extra, imported only when used).

``train_target(kind, data, dp={"epsilon": 8, "delta": 1e-5, "max_grad_norm": 1.0})``
trains the kind's model with DP-SGD (Abadi et al. 2016): every step draws a
Poisson sample of the training split (each utterance independently with
probability ``q = 1 / batches per epoch``, the sampling the accountant
assumes), clips each utterance's gradient to ``max_grad_norm``, adds Gaussian
noise of standard deviation ``noise_multiplier * max_grad_norm`` and divides
by the expected batch size. The noise multiplier is the smallest that keeps
``(epsilon, delta)`` over the configured epochs (Opacus's
``get_noise_multiplier`` with its accountant, PRV by default); the epsilon
actually spent (fewer steps when early stopping fires) is read back from the
accountant and stored with the target.

:func:`dp_config` checks the user's ``dp`` dict; :class:`PrivateTraining`
wraps a model and an optimizer factory for any training loop:

    private = PrivateTraining(model, make_optimizer, dp=cfg.dp, n=len(train), batch_size=..., epochs=..., seed=seed)
    for epoch ...:
        for rows in private.batches():          # Poisson batches of row indices (maybe empty)
            if not len(rows): private.empty_step(); continue
            losses = loss_fn(private.module, rows)   # per-example losses [B]
            private.optimizer.zero_grad(); losses.mean().backward(); private.optimizer.step()
    facts = private.finish(model)               # weights copied back into ``model``; the DP facts

Layers Opacus cannot take per-sample gradients of are replaced for training
only: ``nn.LSTM`` by Opacus's ``DPLSTM`` (same weights, same maths, names
mapped back), so the returned model is the same class as a non-DP one; a
pytorch-crf ``CRF`` gets the exact grad sampler of :mod:`.opacus_crf`. What
is not covered (noted in the facts): the validation split used for early
stopping is not protected, and the noise comes from a seeded
``torch.Generator``, not a cryptographic one (``secure_mode=False``), so that a
fixed seed gives the same weights twice; a seeded RNG is fine for an audit and
not for a production release.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import math
import numbers
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

INSTALL = 'pip install -e ".[dp]"'
ACCOUNTANTS = ("prv", "rdp")
DP_KEYS = ("epsilon", "delta", "max_grad_norm", "accountant")


@dataclass(frozen=True)
class DPConfig:
    """A DP-SGD target: ``(epsilon, delta)`` over the whole training, per-sample clipping norm, accountant."""

    epsilon: float
    delta: float
    max_grad_norm: float = 1.0
    accountant: str = "prv"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def dp_config(dp: Any, *, kind: str = "target") -> DPConfig | None:
    """The checked :class:`DPConfig` of ``dp`` (a dict, a ``DPConfig`` or None = no DP); a clear error otherwise.

    Raises ``ImportError`` naming the ``dp`` extra when Opacus is missing, ``TypeError`` for unknown or
    missing keys, ``ValueError`` for epsilon <= 0, delta outside (0, 1), max_grad_norm <= 0.
    """
    if dp is None:
        return None
    require_opacus(kind)  # before anything is keyed or trained
    if isinstance(dp, DPConfig):
        return _checked(dp, kind)
    if not isinstance(dp, dict):
        raise TypeError(f"train_target({kind!r}, ..., dp={dp!r}): dp must be a dict such as "
                        "{'epsilon': 8, 'delta': 1e-5, 'max_grad_norm': 1.0}, or None for no DP")
    unknown = sorted(str(k) for k in set(dp) - set(DP_KEYS))
    if unknown:
        raise TypeError(f"train_target({kind!r}, ..., dp=...) got unknown dp key(s) {unknown}; accepted keys: "
                        f"{', '.join(DP_KEYS)}")
    missing = [k for k in ("epsilon", "delta") if k not in dp]
    if missing:
        raise TypeError(f"train_target({kind!r}, ..., dp=...) is missing {missing}; fix: give the privacy target, "
                        "e.g. dp={'epsilon': 8, 'delta': 1e-5, 'max_grad_norm': 1.0}")
    return _checked(DPConfig(**dp), kind)


def _checked(cfg: DPConfig, kind: str) -> DPConfig:
    where = f"train_target({kind!r}, ..., dp=...)"
    if not _number(cfg.epsilon) or cfg.epsilon <= 0:
        raise ValueError(f"{where}: epsilon={cfg.epsilon!r} must be a finite number > 0 (the privacy budget of "
                         "the whole training); fix: e.g. epsilon=8")
    if not _number(cfg.delta) or not 0 < cfg.delta < 1:
        raise ValueError(f"{where}: delta={cfg.delta!r} must be a number in (0, 1), well below 1 / (training set "
                         "size); fix: e.g. delta=1e-5")
    if not _number(cfg.max_grad_norm) or cfg.max_grad_norm <= 0:
        raise ValueError(f"{where}: max_grad_norm={cfg.max_grad_norm!r} must be a finite number > 0 (the per-sample "
                         "clipping norm); fix: e.g. max_grad_norm=1.0")
    if cfg.accountant not in ACCOUNTANTS:
        raise ValueError(f"{where}: accountant={cfg.accountant!r} is not one of {ACCOUNTANTS}")
    return DPConfig(float(cfg.epsilon), float(cfg.delta), float(cfg.max_grad_norm), cfg.accountant)


def require_opacus(kind: str = "target"):
    """Import Opacus, or raise ``ImportError`` naming the extra that installs it."""
    try:
        import opacus
    except ImportError as exc:
        raise ImportError(f"train_target({kind!r}, ..., dp=...) trains with DP-SGD through Opacus, which is not "
                          f"installed; fix: {INSTALL} (or pip install opacus), or drop dp= to train without "
                          "DP") from exc
    return opacus


def derived_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for ``purpose`` derived from ``seed`` (independent streams for sampling and noise)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{purpose}".encode()).digest()[:8], "little") >> 1


def _register_crf_samplers(model: nn.Module) -> None:
    """Give every pytorch-crf ``CRF`` (sub)class in ``model`` the exact grad sampler of :mod:`.opacus_crf`."""
    from opacus.grad_sample import GradSampleModule
    from torchcrf import CRF

    from .crf import crf_grad_sample

    for module in model.modules():
        if isinstance(module, CRF):
            GradSampleModule.GRAD_SAMPLERS.setdefault(type(module), crf_grad_sample)


def _trainable_module(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose layers Opacus supports (``nn.LSTM`` -> ``DPLSTM``, same weights)."""
    from opacus.validators import ModuleValidator

    private = ModuleValidator.fix(copy.deepcopy(model))
    ModuleValidator.validate(private, strict=True)
    return private


class PrivateTraining:
    """DP-SGD for one training: the Opacus-ready copy of the model, its DP optimizer and Poisson batches.

    ``make_optimizer(parameters)`` builds the plain optimizer (Adam, AdamW, SGD)
    that DP-SGD wraps; ``n`` is the size of the training split, ``batch_size``
    the expected batch size, ``epochs`` the number of passes the noise is
    calibrated for.
    """

    def __init__(self, model: nn.Module, make_optimizer: Callable[[list], torch.optim.Optimizer], *, dp: DPConfig,
                 n: int, batch_size: int, epochs: int, seed: int, kind: str = "target") -> None:
        require_opacus(kind)
        from opacus import PrivacyEngine
        from torch.utils.data import DataLoader, TensorDataset

        self.dp = dp
        self.module = _trainable_module(model)
        _register_crf_samplers(self.module)
        optimizer = make_optimizer([p for p in self.module.parameters() if p.requires_grad])
        loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=batch_size,
                            generator=torch.Generator().manual_seed(derived_seed(seed, "dp-sampling")))
        with _quiet():
            self.engine = PrivacyEngine(accountant=dp.accountant, secure_mode=False)
            self.wrapped, self.optimizer, self.loader = self.engine.make_private_with_epsilon(
                module=self.module, optimizer=optimizer, data_loader=loader, target_epsilon=dp.epsilon,
                target_delta=dp.delta, epochs=epochs, max_grad_norm=dp.max_grad_norm, poisson_sampling=True,
                noise_generator=torch.Generator().manual_seed(derived_seed(seed, "dp-noise")),
                grad_sample_mode="hooks")
        self.sample_rate = 1.0 / len(loader)
        self.epochs = epochs
        self.steps = 0

    def batches(self) -> Iterator[torch.Tensor]:
        """One epoch of Poisson batches: a tensor of training-row indices each (possibly empty)."""
        for batch in self.loader:
            rows = batch[0] if len(batch) else torch.zeros(0, dtype=torch.long)
            self.steps += 1
            yield rows.long()

    def step(self, losses: torch.Tensor) -> None:
        """One DP-SGD step on the per-example ``losses [B]`` of a Poisson batch (their mean, as accounted)."""
        self.optimizer.zero_grad(set_to_none=True)
        with _quiet():
            losses.mean().backward()
        self.optimizer.step()

    def empty_step(self) -> None:
        """A step on an empty Poisson batch: no gradient, but the noise is added and the step accounted."""
        self.optimizer.zero_grad(set_to_none=True)
        for p in self.optimizer.params:
            p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
        self.optimizer.step()

    def facts(self) -> dict:
        """The DP config, the noise, the sampling and the epsilon spent so far (accountant), JSON-safe."""
        with _quiet():
            spent = float(self.engine.get_epsilon(self.dp.delta)) if len(self.engine.accountant) else 0.0
        return {**self.dp.to_json(), "epsilon_spent": spent, "noise_multiplier": float(self.optimizer.noise_multiplier),
                "sample_rate": self.sample_rate, "expected_batch_size": int(self.optimizer.expected_batch_size),
                "steps": self.steps, "epochs_calibrated": self.epochs, "poisson_sampling": True,
                "secure_rng": False, "opacus": _opacus_version()}

    def finish(self, model: nn.Module) -> dict:
        """Copy the trained weights back into ``model`` (its own layer classes), remove the hooks, return facts."""
        state = self.module.state_dict()
        wanted = model.state_dict()
        missing = sorted(set(wanted) - set(state))
        if missing:
            raise RuntimeError(f"DP training lost the weights {missing[:5]} of {type(model).__name__}")
        model.load_state_dict({k: state[k] for k in wanted})
        facts = self.facts()
        self.wrapped.remove_hooks()
        return facts


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence Opacus's and torch's notices that are expected here: the seeded (not secure) RNG, chosen for
    reproducibility and stated in the facts; RDP's optimal order at the edge of its grid; a full backward
    hook firing on a layer whose input needs no gradient (the embedding reading token ids)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
        warnings.filterwarnings("ignore", message=".*Optimal order is the (largest|smallest) alpha.*")
        warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")
        yield


def _opacus_version() -> str:
    from importlib.metadata import version

    return version("opacus")
