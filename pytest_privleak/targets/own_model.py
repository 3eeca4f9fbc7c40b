"""A team's own torch model, trained once per content hash like the built-in targets (issue 11 item 6).

``train_own_model(train, dataset, build=..., wrap=..., **config)`` (the
fixture of the same name) calls ``train(dataset, seed=seed, **config)``,
which must return a ``torch.nn.Module``, and caches its ``state_dict`` as
safetensors (never a pickle) in the target cache. A later run rebuilds the
module with ``build(dataset)`` (the untrained architecture) and loads the
weights into it, strictly: a ``build`` that does not make the module ``train``
made is refused when the entry is first written, not discovered a run later.

The entry's key covers what decides the weights: the dataset's content hash,
the config, the seed, the device type, the torch version, and the source of
every ``.py`` file of the top-level package (or the single module) that
defines ``train``, plus any ``sources=`` paths. Edit the training code and the
next run retrains; code outside those files is not seen, so name it in
``sources=``. ``build`` is not in the key: a ``build`` that no longer makes the
cached architecture fails the strict load, and the entry is discarded (with a
warning) and retrained.

The returned model (``wrap(module)`` when ``wrap`` is given, the protocol
adapter a team writes) is always ``build(dataset)`` holding the weights, also
on the run that trained them, and carries a content hash of the entry's key
and of the source of the packages that define the module's class, ``build``
and ``wrap`` (what turns the weights into the outputs the attacks read), so
the attack-result cache (:mod:`pytest_privleak.cache.results`) reuses its
figures: an unchanged model re-runs no attack, and an edited adapter re-runs
them without retraining. ``train``, ``build`` and ``wrap`` must be
module-level functions or classes: a ``functools.partial``, a closure or a
callable object is refused, since its bound state would not be in the key. Training runs with torch pinned to one
CPU thread and its global RNG seeded by ``seed`` and restored afterwards, like
the built-in targets (the thread count changes the weights; see
:func:`.training.torch_threads`).
"""
from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..cache.manifest import sha256_file
from . import training

KIND = "own-model"


def _defining_files(function: Any, argument: str) -> list[Path]:
    """The source files of the package (or the single module) that defines ``function``."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    if module is None or getattr(module, "__file__", None) is None:
        raise TypeError(f"{argument}={function!r} must be a function or class defined in a Python file (its source "
                        "is part of the cache key, so that editing it retrains); fix: define it in a module of "
                        "your project, not in a notebook cell or with exec")
    top = module.__name__.split(".")[0]
    package = sys.modules.get(top)
    package_file = getattr(package, "__file__", None)
    if package is not None and package_file and Path(package_file).name == "__init__.py":
        return sorted(Path(package_file).parent.rglob("*.py"))
    return [Path(module.__file__)]


def source_digest(functions: dict[str, Any], sources: Sequence[str | Path] = ()) -> dict[str, str]:
    """SHA-256 of each file defining ``functions`` (argument name -> callable) and of each of ``sources``."""
    files: dict[Path, None] = {}
    for argument, function in functions.items():
        if function is not None:
            files.update(dict.fromkeys(p.resolve() for p in _defining_files(function, argument)))
    for extra in sources:
        path = Path(extra)
        if not path.is_file():
            raise FileNotFoundError(f"sources= names {str(path)!r}, which is not a file; fix: list the .py files "
                                    "the model's training depends on beyond the package of train/build/wrap")
        files[path.resolve()] = None
    return {str(path): sha256_file(path) for path in sorted(files)}


def _identity(function: Any) -> str:
    return f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', type(function).__name__)}"


def _check_keyable(function: Any, argument: str) -> None:
    """Refuse a callable whose behaviour depends on state the key cannot see (bound arguments, captured
    variables, an instance's attributes): only its name and its module's source go into the key."""
    import functools

    plain = inspect.isclass(function) or (inspect.isfunction(function) and not function.__closure__)
    if not plain:
        kind = ("a functools.partial" if isinstance(function, functools.partial)
                else "a closure (it captures variables)" if inspect.isfunction(function)
                else f"a {type(function).__name__} (a bound method or callable object)")
        raise TypeError(f"{argument}={function!r} is {kind}: its bound arguments or state would not be part of the "
                        "cache key, so a changed value would load the old model. Fix: pass a module-level function "
                        "or class, and give its settings as keyword arguments of train_own_model (**config)")


def _check(train: Any, build: Any, wrap: Any, dataset: Any) -> None:
    if not callable(train):
        raise TypeError(f"train={train!r} must be a function train(dataset, seed=..., **config) -> torch.nn.Module")
    if not callable(build):
        raise TypeError(f"build={build!r} must be a function build(dataset) -> the untrained torch.nn.Module "
                        "(the architecture the cached weights are loaded into); fix: e.g. "
                        "build=lambda data: MyModel(vocabulary_of(data))")
    if wrap is not None and not callable(wrap):
        raise TypeError(f"wrap={wrap!r} must be None or a callable taking the trained module (your protocol "
                        "adapter class, e.g. wrap=SoftInputAdapter)")
    for argument, function in (("train", train), ("build", build), ("wrap", wrap)):
        if function is not None:
            _check_keyable(function, argument)
    if not callable(getattr(dataset, "content_hash", None)):
        raise TypeError(f"dataset must have content_hash() (a pytest_privleak.data dataset, e.g. from the "
                        f"nlu_dataset or inject_canaries fixtures), got {type(dataset).__name__}")


def _built(build: Callable[[Any], Any], dataset: Any) -> nn.Module:
    module = build(dataset)
    if not isinstance(module, nn.Module):
        raise TypeError(f"build(dataset) returned a {type(module).__name__}, not a torch.nn.Module; fix: return the "
                        "untrained model (the cached weights are loaded into it)")
    return module


#: the record key listing the state-dict entries stored once for several names (tied weights)
ALIASES = "aliases"
#: the dtypes safetensors writes (its format's F64 .. BOOL, C64 and the float8 kinds this torch has)
SAFETENSORS_DTYPES = frozenset([torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64] + [
    getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                      "uint16", "uint32", "uint64") if hasattr(torch, name)])


def _storage_key(tensor: torch.Tensor) -> tuple:
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
            tensor.dtype, tensor.device)


def storable(state_dict: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``(tensors, aliases)``: each distinct tensor once, safetensors' way, and the names that repeat one of them.

    Tied weights (GPT-2's input and output embeddings, a shared head) are the
    same tensor under several names, which safetensors refuses to write ("Some
    tensors share memory"). The first name of each keeps the tensor, the others
    are recorded as ``{alias: name}`` and restored on load (:func:`restored`).
    Tensors that overlap in memory without being the same view (one a slice of
    another) are written as copies of their own.
    """
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    first: dict[tuple, str] = {}
    storages: dict[int, str] = {}
    for name, value in state_dict.items():
        key = _storage_key(value)
        if key in first:
            aliases[name] = first[key]
            continue
        first[key] = name
        storage = value.untyped_storage().data_ptr()
        overlaps = storage in storages and value.numel() > 0
        storages.setdefault(storage, name)
        tensors[name] = value.detach().clone() if overlaps else value.detach()
    return tensors, aliases


def restored(tensors: dict[str, torch.Tensor], aliases: dict[str, str]) -> dict[str, torch.Tensor]:
    """The state dict :func:`storable` split: every alias names its tensor again."""
    out = dict(tensors)
    for alias, name in aliases.items():
        out[alias] = tensors[name]
    return out


def check_storable(module: nn.Module, build: Any) -> None:
    """Refuse, before any training, a module whose ``state_dict`` the cache cannot write as safetensors.

    The cache keeps plain dense tensors of safetensors' dtypes (tied weights
    included, see :func:`storable`); extra state objects (``get_extra_state``),
    sparse, quantized or meta tensors would fail only when the trained weights
    are written, after the training time is spent.
    """
    bad: list[str] = []
    for name, value in module.state_dict().items():
        if not isinstance(value, torch.Tensor):
            bad.append(f"{name} is a {type(value).__name__} (extra state), not a tensor")
        elif value.layout != torch.strided:
            bad.append(f"{name} is a {value.layout} tensor")
        elif value.is_quantized:
            bad.append(f"{name} is a quantized tensor")
        elif value.is_meta:
            bad.append(f"{name} is on the meta device (no data)")
        elif value.dtype not in SAFETENSORS_DTYPES:
            bad.append(f"{name} has dtype {value.dtype}, which safetensors cannot write")
    if bad:
        raise TypeError(f"build={_identity(build)} makes a module the target cache cannot store as safetensors (checked "
                        f"before training, so no training time is lost): {'; '.join(bad[:4])}"
                        f"{f' (and {len(bad) - 4} more)' if len(bad) > 4 else ''}; fix: keep only dense tensors of "
                        "float, integer or bool dtypes in the state_dict (register other state as non-persistent "
                        "buffers, rebuilt by build), or convert a quantized or sparse model after loading it")


def _same_architecture(trained: nn.Module, empty: nn.Module, train: Any, build: Any) -> None:
    """Refuse a ``build`` whose module cannot take ``train``'s weights, before anything is cached."""
    ours = {k: (tuple(v.shape), str(v.dtype)) for k, v in trained.state_dict().items()}
    theirs = {k: (tuple(v.shape), str(v.dtype)) for k, v in empty.state_dict().items()}
    if ours != theirs:
        differ = sorted(set(ours) ^ set(theirs)) or sorted(k for k in ours if ours[k] != theirs[k])
        raise ValueError(f"build={_identity(build)} makes a module whose weights differ from the one "
                         f"train={_identity(train)} returned (first differences: {', '.join(differ[:4])}); fix: "
                         "build(dataset) must construct the same architecture, untrained, for the same dataset")


def train_own_model(train: Callable[..., nn.Module], dataset: Any, *, build: Callable[[Any], nn.Module],
                    wrap: Callable[[nn.Module], Any] | None = None, cache=None, device: str = "cpu", seed: int = 0,
                    sources: Sequence[str | Path] = (), name: str | None = None, **config: Any) -> Any:
    """Train ``train(dataset, seed=seed, **config)`` once per content hash, else load it; see the module docstring.

    ``device`` is passed to ``train`` only when it takes a ``device`` argument;
    the loaded module is moved to it. ``name`` labels the progress line
    (default ``"<train's name> <key[:8]>"``). Returns ``wrap(module)`` or the
    module, in eval mode, carrying the content hash (``cache=None``: trained
    every time, and no content hash, so its attacks are not cached either).
    """
    from ..cache.targets import content_hash
    from ..cache.results import mark_content_hash

    _check(train, build, wrap, dataset)
    torch_device = torch.device(device)
    try:
        json.dumps(config)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the config of {_identity(train)} must be plain JSON values (numbers, strings, lists, "
                        f"dicts), got {config!r} ({exc}); it is part of the cache key") from exc
    key = content_hash({"kind": KIND, "train": _identity(train),
                        "sources": source_digest({"train": train}, sources),
                        "dataset": dataset.content_hash(), "config": config, "seed": seed,
                        "device_type": torch_device.type, "torch": torch.__version__,
                        "code_version": training.CODE_VERSION})
    takes_device = "device" in inspect.signature(train).parameters

    def fresh() -> nn.Module:
        check_storable(_built(build, dataset), build)      # before training: a refusal costs no training time
        with training.seeded(seed, torch_device), \
                training.torch_threads(1 if torch_device.type == "cpu" else None):
            kwargs = dict(config, device=str(torch_device)) if takes_device else dict(config)
            module = train(dataset, seed=seed, **kwargs)
        if not isinstance(module, nn.Module):
            raise TypeError(f"train={_identity(train)} returned a {type(module).__name__}, not a torch.nn.Module; "
                            "fix: return the trained model (its state_dict is what the cache keeps)")
        # the same object a later run loads: build(dataset) holding the trained weights
        rebuilt = _built(build, dataset)
        _same_architecture(module, rebuilt, train, build)
        rebuilt.load_state_dict(module.state_dict(), strict=True)
        return rebuilt

    def save(module: nn.Module, folder: Path) -> dict:
        tensors, aliases = storable(module.state_dict())
        record = {"kind": KIND, "code_version": training.CODE_VERSION, "content_hash": key, "seed": seed,
                  "train": _identity(train), "config": config, **({ALIASES: aliases} if aliases else {})}
        training.save_entry(folder, tensors, record)
        return {"kind": KIND, "seed": seed, "train": _identity(train), "config": config}

    def load(folder: Path) -> nn.Module:
        tensors, record = training.load_entry(folder, "cpu")
        aliases = record.get(ALIASES, {})
        if not isinstance(aliases, dict) or any(v not in tensors for v in aliases.values()):
            raise training.CorruptEntryError(f"cache entry {folder}: its {ALIASES!r} name tensors it does not hold")
        module = _built(build, dataset)
        try:
            module.load_state_dict(restored(tensors, aliases), strict=True)
        except RuntimeError as exc:
            raise training.CorruptEntryError(f"cache entry {folder} does not load into build={_identity(build)}: "
                                             f"{exc}") from exc
        return module

    label = name or f"{getattr(train, '__qualname__', 'model')} {key[:8]}"
    module, _ = training.cached(cache, key, build=fresh, save=save, load=load, name=label)
    module = module.to(torch_device).eval()
    model = wrap(module) if wrap is not None else module
    if cache is None:
        return model
    # what the attacks see: these weights, run by the module's class and read through the adapter
    outputs = content_hash({"weights": key, "build": _identity(build), "wrap": None if wrap is None else _identity(wrap),
                            "code": source_digest({"module": type(module), "build": build, "wrap": wrap})})
    return mark_content_hash(model, outputs)
