"""An own model's seeds and references trained in parallel (issue 35 item 2): the same weights as one by one.

Seed ``s`` trains with the same call wherever it runs (this process, a child process of the pool, another
xdist worker through the job board), so its weights are bitwise those of a sequential run on CPU.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from own_model_fixture import bag
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data import generate_snips_like
from pytest_privleak.distribute.board import Board
from pytest_privleak.progress import events as progress
from pytest_privleak.targets import parallel
from pytest_privleak.targets.parallel import NotPortable, OwnTraining, prefetch, to_job
from pytest_privleak.targets.seeds import train_own_model_seeds

pytestmark = pytest.mark.filterwarnings("ignore::pytest_privleak.cache.manifest.UnsignedCacheWarning")

DATA = generate_snips_like(n_train=120, n_valid=10, n_test=10, seed=0)


def digests(models) -> list[str]:
    out = []
    for model in models:
        digest = hashlib.sha256()
        for key, tensor in sorted(model.state_dict().items()):
            digest.update(key.encode() + tensor.numpy().tobytes())
        out.append(digest.hexdigest())
    return out


@pytest.fixture(scope="module", autouse=True)
def end_children():
    """The pool's children live for the module (starting one imports torch), then end."""
    yield
    parallel.shutdown()


@pytest.fixture
def spread():
    """Restore this process's spread after the test."""
    previous = parallel.configure(1)
    yield parallel
    parallel.configure(previous.processes, previous.board)


@pytest.fixture
def notes():
    lines: list[str] = []
    previous = progress.set_sink(lambda event: lines.append(event.line) if event.kind == progress.NOTE else None)
    yield lines
    progress.set_sink(previous)


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    """The seeds 0..3 of the bag model trained one after another (the reference weights)."""
    parallel.configure(1)
    cache = TargetCache(tmp_path_factory.mktemp("sequential"))
    return digests(train_own_model_seeds(bag.train, DATA, seeds=4, build=bag.untrained, cache=cache, steps=5))


def test_a_pool_gives_each_seed_the_weights_it_gets_one_after_another(spread, sequential, tmp_path):
    spread.configure(2)
    child = spread.pool._children_for(1)[0]
    assert child.ready.wait(120), child.last_error()      # started: the pool hands it jobs at once
    models = train_own_model_seeds(bag.train, DATA, seeds=4, build=bag.untrained, cache=TargetCache(tmp_path),
                                   steps=5)
    assert digests(models) == sequential
    assert spread.pool.LAST["elsewhere"] >= 1 and spread.pool.LAST["here"] + spread.pool.LAST["elsewhere"] == 4


def test_a_short_training_starts_no_process(spread, sequential, tmp_path):
    """Its first seed took under START_AFTER seconds: a new process (importing torch) would cost more."""
    spread.shutdown()
    spread.configure(2)
    models = train_own_model_seeds(bag.train, DATA, seeds=4, build=bag.untrained, cache=TargetCache(tmp_path),
                                   steps=5)
    assert digests(models) == sequential and spread.pool.LAST == {"here": 4, "elsewhere": 0}
    assert not spread.pool._children


def _hidden_module(tmp_path: Path):
    """A module imported from a folder that is not on sys.path (as pytest's --import-mode=importlib does)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "hidden_train.py").write_text(textwrap.dedent("""
        from own_model_fixture.bag import train as bag_train

        def train(dataset, seed=0, steps=5):
            return bag_train(dataset, seed=seed, steps=steps)
    """))
    spec = importlib.util.spec_from_file_location("hidden_train", folder / "hidden_train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["hidden_train"] = module
    spec.loader.exec_module(module)
    return module


def test_a_function_a_new_process_cannot_import_trains_here_with_one_line_saying_why(spread, sequential, tmp_path,
                                                                                     notes, monkeypatch):
    hidden = _hidden_module(tmp_path)
    spread.shutdown()
    monkeypatch.setattr(parallel.pool, "START_AFTER", 0.0)       # as if its first seed had taken long
    try:
        spread.configure(2)
        models = train_own_model_seeds(hidden.train, DATA, seeds=4, build=bag.untrained,
                                       cache=TargetCache(tmp_path / "cache"), steps=5)
    finally:
        del sys.modules["hidden_train"]
    assert digests(models) == sequential
    assert len(notes) == 1 and "the 4 seeds of train_own_model(hidden_train:train) train one after another" in \
        notes[0] and "would not find" in notes[0] and "--import-mode=importlib" in notes[0]
    assert not spread.pool._children


def test_what_cannot_be_handed_to_another_process_says_why(tmp_path):
    cache = TargetCache(tmp_path)

    def local_build(dataset):
        return bag.untrained(dataset)

    cases = [
        (OwnTraining(bag.train, DATA, local_build, cache=cache), r"build=.*local_build is a lambda or a function "
                                                                 r"defined inside another"),
        (OwnTraining(bag.train, DATA, bag.untrained, cache=None), r"no cache to hand the trained model back"),
        (OwnTraining(bag.train, object(), bag.untrained, cache=cache), r"the dataset is a object, not a pytest_privleak NLUDataset"),
    ]
    for training, pattern in cases:
        with pytest.raises(NotPortable, match=pattern):
            to_job(training)


def test_a_training_that_fails_in_another_process_is_trained_here_and_fails_as_before(spread, tmp_path, notes):
    spread.configure(2)
    child = spread.pool._children_for(1)[0]
    assert child.ready.wait(120), child.last_error()
    trainings = [OwnTraining(bag.train, DATA, bag.untrained, cache=TargetCache(tmp_path), seed=s,
                             config={"steps": 5}) for s in range(3)]
    trainings.append(OwnTraining(bag.not_a_module, DATA, bag.untrained, cache=TargetCache(tmp_path), seed=3))
    made = prefetch(trainings, what="four trainings")       # the child takes the last one, and fails
    assert 3 not in made and 0 in made                      # the child failed on 3; this process began at 0
    assert any("a training in another process failed; it trains here instead" in line and "returned a dict" in line
               for line in notes)
    with pytest.raises(TypeError, match=r"returned a dict, not a torch.nn.Module"):
        trainings[3].run()                                  # what the caller's own call then does, as before


HELPER = """
import sys
sys.path[:0] = {paths!r}
from pytest_privleak.distribute.board import Board
from pytest_privleak.targets.parallel import help_others
import own_model_fixture.bag, pytest_privleak.targets.own_model  # imported before "ready", as in a worker
print("ready", flush=True)
print(help_others(Board({folder!r}, "gw1"), device="cpu", poll=0.1))
"""


def test_a_worker_out_of_tests_runs_the_jobs_another_posted_and_the_poster_loads_them(spread, sequential, tmp_path):
    """The xdist job board with two processes: this one posts and works from the front, a helper process (as
    an idle xdist worker) claims from the back; the poster loads what the helper trained."""
    folder = str(tmp_path / "board")
    poster = Board(folder, "gw0")
    poster.running()
    helper = subprocess.Popen([sys.executable, "-c", HELPER.format(paths=sys.path, folder=folder)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert helper.stdout.readline().strip() == "ready"
        spread.configure(1, poster)
        models = train_own_model_seeds(bag.train, DATA, seeds=4, build=bag.untrained,
                                       cache=TargetCache(tmp_path / "cache"), steps=60)
    finally:
        poster.finished()
        out, _ = helper.communicate(timeout=300)
        helper.stdout.close()
    spread.configure(1)
    assert digests(models) == digests(train_own_model_seeds(bag.train, DATA, seeds=4, build=bag.untrained,
                                                            cache=TargetCache(tmp_path / "again"), steps=60))
    assert helper.returncode == 0 and int(out.split()[-1]) >= 1, out      # the helper trained some of them
    assert not list((Path(folder) / "jobs").glob("*.json"))                # withdrawn


def test_the_job_is_json_and_names_functions_by_module_and_file(tmp_path):
    job = to_job(OwnTraining(bag.train, DATA, bag.untrained, cache=TargetCache(tmp_path), seed=2,
                             config={"steps": 5}))
    assert json.loads(json.dumps(job)) == job
    assert job["train"] == {"module": "own_model_fixture.bag", "name": "train",
                            "file": str(Path(bag.__file__).resolve())}
    assert job["seed"] == 2 and job["config"] == {"steps": 5} and job["cache"]["folder"] == str(tmp_path.resolve())
    assert parallel.from_job(job).key() == job["key"]


XDIST_TEST = '''
import hashlib, os
from own_model_fixture import bag

def train(dataset, seed=0, steps=5):
    model = bag.train(dataset, seed=seed, steps=steps)
    with open(os.environ["SEEDS_LOG"], "a") as out:
        out.write(f"{seed} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")
    return model

def test_own_seeds(train_own_model, nlu_dataset):
    models = train_own_model(train, nlu_dataset, build=bag.untrained, seeds=4, steps=150)
    with open(os.environ["DIGESTS"], "w") as out:
        for model in models:
            digest = hashlib.sha256()
            for key, tensor in sorted(model.state_dict().items()):
                digest.update(key.encode() + tensor.numpy().tobytes())
            out.write(digest.hexdigest() + "\\n")
'''


@pytest.mark.slow
def test_under_xdist_an_idle_worker_trains_some_seeds_and_the_weights_are_those_of_one_process(pytester,
                                                                                               monkeypatch):
    """One test needs 4 seeds of an own model under ``-n 2``: the worker without tests trains some of them from the
    job board; the weights equal those of ``-n 0`` trained one after another."""
    import shutil

    shutil.copytree(Path(bag.__file__).parent, pytester.path / "own_model_fixture")
    pytester.makepyfile(test_own=XDIST_TEST)
    runs = {}
    # one process per worker, as -n 2 has by default on 2 cores (with more cores a worker's pool comes first)
    for name, args in (("one", ["--privleak-train-processes=1"]), ("n2", ["-n", "2", "--privleak-train-processes=1"])):
        monkeypatch.setenv("SEEDS_LOG", str(pytester.path / f"log-{name}"))
        monkeypatch.setenv("DIGESTS", str(pytester.path / f"digests-{name}"))
        result = pytester.runpytest_subprocess(f"--privleak-cache-dir=cache-{name}", *args)
        assert result.ret == 0, result.stdout.str()[-2000:]
        runs[name] = {line.split()[1] for line in (pytester.path / f"log-{name}").read_text().splitlines()}
    assert runs == {"one": {"main"}, "n2": {"gw0", "gw1"}}
    assert (pytester.path / "digests-one").read_text() == (pytester.path / "digests-n2").read_text()


def test_the_global_torch_settings_travel_with_the_job_and_a_helper_with_others_refuses_it(tmp_path):
    """A conftest that sets torch's default dtype changes the weights: a child process takes the poster's
    settings first; a helper worker whose own differ leaves the job to its poster."""
    from pytest_privleak.targets.parallel.jobs import apply_torch_settings, torch_settings

    before = torch_settings()
    torch.set_default_dtype(torch.float64)
    try:
        job = to_job(OwnTraining(bag.train, DATA, bag.untrained, cache=TargetCache(tmp_path), config={"steps": 5}))
    finally:
        apply_torch_settings(before)
    assert job["torch"]["default_dtype"] == "float64"
    with pytest.raises(NotPortable, match=r"torch's global settings differ here"):
        parallel.from_job(job)
    try:
        apply_torch_settings(job["torch"])
        assert parallel.from_job(job).key() == job["key"]
    finally:
        apply_torch_settings(before)
    assert torch.get_default_dtype() == torch.float32
