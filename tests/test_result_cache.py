"""The attack-result cache: keys, verified entries, and figures identical whether computed or loaded."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from helpers_models import QuadraticModel
from helpers_result_cache import active_result_cache, drop_cache_line, leak_message, without_cache_line
from pytest_privleak.cache import results as rc
from pytest_privleak.attacks.cea.assertion import assert_cea_accuracy_at_most, measure_cea
from pytest_privleak.attacks.exposure.discriminative_assertion import assert_d_exposure_below
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below, measure_exposure
from pytest_privleak.attacks.membership.assertion import assert_membership_auc_at_most
from pytest_privleak.canaries import DIGITS, canary
from pytest_privleak.data.types import Utterance
from pytest_privleak.ldp import OME, SUE
from pytest_privleak.ldp.assertion import assert_ldp_holds, measure_ldp
from pytest_privleak.results import LeakResult
from pytest_privleak import expect_leak

VOCAB = ("my", "pin", "code", "is") + DIGITS
PIN = canary("pin", secret="7 0 3 9")
HASH = "ab" * 32
LDP_SMALL = dict(samples=20_000, train_samples=2_000, val_samples=5_000, progress=None)


class Counting:
    """Counts calls to ``compute`` and returns fresh measured results."""

    def __init__(self, value: float = 0.25):
        self.calls, self.value = 0, value

    def __call__(self):
        self.calls += 1
        return [LeakResult("demo", "figure", np.float32(self.value), interval=(0.0, float("inf")), confidence=0.95,
                           chance=0.5, label="demo", evidence={"pair": (1, 2)}, extra={"x": np.float64(1.5)})]


class Hashed:
    """A model object with a declared content hash and no weights."""

    def __init__(self, digest: str = HASH):
        rc.mark_content_hash(self, digest)


@pytest.fixture
def cache(tmp_path):
    """An active result cache in a fresh folder (the plugin's own, if any, is restored afterwards)."""
    with active_result_cache(tmp_path / "results") as made:
        yield made


# --- keys ----------------------------------------------------------------------------------

def test_key_changes_with_every_input_and_only_models_with_a_hash_get_one():
    base = rc.result_key("cea", [Hashed()], {"canary": PIN, "seed": 0, "name": None})
    assert base == rc.result_key("cea", [Hashed()], {"canary": PIN, "seed": 0, "name": None})
    others = [rc.result_key("exposure", [Hashed()], {"canary": PIN, "seed": 0, "name": None}),
              rc.result_key("cea", [Hashed("cd" * 32)], {"canary": PIN, "seed": 0, "name": None}),
              rc.result_key("cea", [Hashed()], {"canary": canary("pin", secret="7 0 3 8"), "seed": 0, "name": None}),
              rc.result_key("cea", [Hashed()], {"canary": PIN, "seed": 1, "name": None}),
              rc.result_key("cea", [Hashed()], {"canary": PIN, "seed": 0, "name": "x"})]
    assert len({base, *others}) == 6
    assert rc.result_key("cea", [object()], {"seed": 0}) is None                   # no declared hash
    assert rc.result_key("cea", [Hashed(), object()], {"seed": 0}) is None
    assert rc.result_key("cea", [Hashed()], {"score": lambda x: x}) is None         # cannot be hashed


def test_a_target_whose_weights_changed_after_training_loses_its_hash():
    model = torch.nn.Linear(3, 2)
    holder = type("Holder", (), {})()
    holder.net = model
    rc.mark_content_hash(holder, HASH)
    assert rc.model_hash(holder) == HASH
    with torch.no_grad():
        model.weight[0, 0] += 1.0
    assert rc.model_hash(holder) is None


def test_a_malformed_content_hash_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"64-character lowercase hex.*fix: pytest_privleak\.cache\.targets\.content_hash"):
        rc.mark_content_hash(object.__new__(Hashed), "not-a-hash")


def test_built_in_mechanisms_are_identified_by_class_and_parameters_user_ones_are_not():
    assert rc.mechanism_identity(SUE(k=7, epsilon=1.0))["class"] == "SUE"
    assert rc.mechanism_identity(SUE(k=7, epsilon=1.0)) != rc.mechanism_identity(SUE(k=7, epsilon=2.0))

    class Mine:
        epsilon = 1.0

    assert rc.mechanism_identity(Mine()) is None
    assert rc.mechanism_identity(Hashed()) == {"content_hash": HASH}


# --- entries -------------------------------------------------------------------------------

def test_stored_and_loaded_results_are_identical_but_for_the_line_saying_so(cache):
    compute = Counting()
    first = rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)
    second = rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)
    assert compute.calls == 1 and len(cache.stored) == 1 and len(cache.loaded) == 1
    assert rc.LOADED_EVIDENCE not in first[0].evidence
    note = second[0].evidence[rc.LOADED_EVIDENCE]
    assert note.startswith(f"loaded from the result cache (key {cache.stored[0][:16]}") and "--privleak-rerun" in note
    assert without_cache_line(second[0]) == first[0].to_json()
    assert first[0].interval == (0.0, float("inf")) and first[0].value == pytest.approx(0.25)


def test_without_an_active_cache_or_a_hash_everything_is_computed(cache):
    compute = Counting()
    rc.cached_results("demo", [object()], {"seed": 0}, compute)
    rc.cached_results("demo", [object()], {"seed": 0}, compute)
    previous = rc.activate(None)
    try:
        rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)
        rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)
    finally:
        rc.activate(previous)
    assert compute.calls == 4 and not cache.stored and not list(cache.root.glob("*.json"))


def test_rerun_recomputes_and_replaces_the_entry(cache):
    rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting(0.25))
    cache.rerun = True
    again = Counting(0.75)
    fresh = rc.cached_results("demo", [Hashed()], {"seed": 0}, again)
    assert again.calls == 1 and fresh[0].value == 0.75
    cache.rerun = False
    assert rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())[0].value == 0.75


def _entry(cache) -> tuple:
    rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())
    path = next(cache.root.glob("*.json"))
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("damage, why", [
    (lambda e: e["results"][0].__setitem__("value", 0.0), r"sha256 .* \(edited or damaged after it was written\)"),
    (lambda e: e.__setitem__("key", "cd" * 32), r"records key '(cd)+', not its file name's"),
    (lambda e: e.__setitem__("results", []), r"'results' is not a non-empty list"),
    (lambda e: e.__setitem__("format", 99), r"format 99, expected 1"),
])
def test_a_tampered_entry_is_never_trusted_it_is_deleted_and_recomputed_with_a_warning(cache, damage, why, capsys):
    path, entry = _entry(cache)
    damage(entry)
    path.write_text(json.dumps(entry))
    compute = Counting(0.5)
    with pytest.warns(rc.ResultCacheWarning, match=f"result cache entry {path}.*{why}.*deleted and the attack"):
        result = rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)
    assert compute.calls == 1 and result[0].value == 0.5
    assert "[privleak] result cache entry" in capsys.readouterr().err
    assert json.loads(path.read_text())["results"][0]["value"] == 0.5      # rewritten from the fresh figure


def test_a_tampered_entry_whose_digest_was_recomputed_still_must_rebuild_as_a_measured_result(cache):
    path, entry = _entry(cache)
    entry["results"][0]["threshold"] = 1.0
    entry["sha256"] = rc.hashlib.sha256(rc._canonical_results(entry["results"]).encode()).hexdigest()
    path.write_text(json.dumps(entry))
    with pytest.warns(rc.ResultCacheWarning, match="carries a threshold"):
        rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())


def test_with_the_cache_secret_set_an_entry_rewritten_with_a_fresh_sha256_is_refused(cache, monkeypatch):
    """The target cache's PRIVLEAK_CACHE_HMAC_KEY signs result entries too: whoever can write the cache folder
    (a poisoned CI cache) but lacks the secret cannot turn a leaking figure into a passing one."""
    monkeypatch.setenv("PRIVLEAK_CACHE_HMAC_KEY", "team secret")
    path, entry = _entry(cache)
    assert rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())[0].evidence[rc.LOADED_EVIDENCE]
    entry["results"][0]["value"] = 0.0
    entry["sha256"] = rc.hashlib.sha256(rc._canonical_results(entry["results"]).encode()).hexdigest()
    path.write_text(json.dumps(entry))
    compute = Counting(0.5)
    with pytest.warns(rc.ResultCacheWarning, match="HMAC does not match the secret in PRIVLEAK_CACHE_HMAC_KEY"):
        assert rc.cached_results("demo", [Hashed()], {"seed": 0}, compute)[0].value == 0.5
    del entry["hmac"]
    path.write_text(json.dumps(entry))
    with pytest.warns(rc.ResultCacheWarning, match="carries no HMAC although PRIVLEAK_CACHE_HMAC_KEY is set"):
        rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())


def test_malformed_json_is_refused_loudly_and_on_mismatch_error_raises(cache):
    path, _ = _entry(cache)
    path.write_text("{not json")
    cache.on_mismatch = "error"
    with pytest.raises(rc.ResultCacheError, match=rf"{path}.*cannot be read as JSON.*Fix: delete it .*--privleak-rerun"):
        rc.cached_results("demo", [Hashed()], {"seed": 0}, Counting())
    assert path.exists()                                                    # kept for investigation


def test_bad_on_mismatch_is_named():
    with pytest.raises(ValueError, match=r"on_mismatch='keep'.*'recompute'.*'error'"):
        rc.ResultCache("x", on_mismatch="keep")


# --- the assertions: computed and loaded give the same verdict, figures and message --------

def _leaky():
    return rc.mark_content_hash(QuadraticModel(VOCAB, {"PinIntent": ["my", "pin", "code", "is", "7", "0", "3", "9"]}),
                                HASH)


def test_cea_verdict_and_message_are_the_same_computed_or_loaded(cache):
    model = _leaky()
    computed = leak_message(lambda: assert_cea_accuracy_at_most(model, PIN, 0.0, max_hdt_floor=0.5))
    loaded = leak_message(lambda: assert_cea_accuracy_at_most(model, PIN, 0.0, max_hdt_floor=0.5))
    assert len(cache.loaded) == 1 and "loaded from the result cache" in loaded
    assert "loaded from the result cache" not in computed
    assert drop_cache_line(loaded) == computed
    cache.rerun = True
    recomputed = measure_cea(model, PIN)
    cache.rerun = False
    assert without_cache_line(measure_cea(model, PIN)) == without_cache_line(recomputed)


def test_cea_of_a_model_without_a_hash_is_always_recomputed(cache):
    plain = QuadraticModel(VOCAB, {"PinIntent": ["my", "pin", "code", "is", "7", "0", "3", "9"]})
    measure_cea(plain, PIN)
    measure_cea(plain, PIN)
    assert not cache.stored and not cache.loaded


def test_exposure_loaded_equals_recomputed_and_the_limit_is_applied_afresh(cache):
    from test_exposure_formula import PIN as EPIN, TableScorer

    scorer = rc.mark_content_hash(TableScorer(canary_rank=3), HASH)
    first = measure_exposure(scorer, EPIN)
    calls = scorer.calls
    passed = assert_exposure_below(scorer, EPIN, 20.0)          # loaded: no scoring, its own limit
    assert scorer.calls == calls and passed.threshold == 20.0 and passed.verdict == "pass"
    with expect_leak():
        assert_exposure_below(scorer, EPIN, 1.0)
    assert _same_figure(without_cache_line(passed), dataclasses.replace(first, threshold=20.0).to_json())


def test_d_exposure_and_membership_are_cached_too(cache):
    from test_d_exposure import STUB_PROBS, StubTagger

    tagger = rc.mark_content_hash(StubTagger(STUB_PROBS), HASH)
    words = {"PER": ["Ann", "Bob", "Cy"]}
    a = assert_d_exposure_below(tagger, {"PER": "Chelsea"}, 5.0, class_words=words)
    b = assert_d_exposure_below(tagger, {"PER": "Chelsea"}, 5.0, class_words=words)
    assert without_cache_line(b) == without_cache_line(a)

    losses = {i: float(i) for i in range(200)}

    class Scorer:
        def score(self, utterances):
            return np.array([losses[int(u.tokens[0][1:])] for u in utterances])

    scorer = rc.mark_content_hash(Scorer(), "cd" * 32)
    members = [Utterance((f"w{i}",), ("O",), "x") for i in range(100)]
    non_members = [Utterance((f"w{i}",), ("O",), "x") for i in range(100, 200)]
    call = lambda: assert_membership_auc_at_most(scorer, members, non_members, 0.6, max_tpr_at_fpr=0.5, fpr=0.01)
    computed, loaded = leak_message(call), leak_message(call)
    assert drop_cache_line(loaded) == computed and "loaded from the result cache" in loaded
    assert len(cache.loaded) == 2


def test_ldp_audits_of_built_in_mechanisms_are_cached_with_their_claim(cache):
    first = measure_ldp(SUE(k=7, epsilon=1.0), **LDP_SMALL)
    again = assert_ldp_holds(SUE(k=7, epsilon=1.0), 1.0, **LDP_SMALL)
    assert len(cache.loaded) == 1 and again.threshold == 1.0
    assert _same_figure(without_cache_line(again), dataclasses.replace(first, threshold=1.0).to_json())
    computed = leak_message(lambda: assert_ldp_holds(OME(lam=10, epsilon=1.0), 1.0, **LDP_SMALL))
    loaded = leak_message(lambda: assert_ldp_holds(OME(lam=10, epsilon=1.0), 1.0, **LDP_SMALL))
    assert drop_cache_line(loaded) == computed


def test_ldp_audits_with_a_time_budget_or_of_a_user_mechanism_are_never_cached(cache):
    from pytest_privleak.ldp.mechanisms import KRR

    class Mine(KRR):
        pass

    measure_ldp(Mine(k=3, epsilon=1.0), **LDP_SMALL)
    measure_ldp(SUE(k=7, epsilon=1.0), time_budget=60.0, **LDP_SMALL)
    assert not cache.stored


def test_the_key_holds_torchs_thread_count():
    """An xdist worker runs with its share of the cores: a figure of an attack that may train (CEA beyond the
    exhaustive budget) measured with another count is not served (scoring attacks: test_result_cache_threads)."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = rc.result_key("cea", [Hashed()], {"seed": 0})
        torch.set_num_threads(2)
        two = rc.result_key("cea", [Hashed()], {"seed": 0})
    finally:
        torch.set_num_threads(before)
    assert one != two


def _same_figure(loaded: dict, computed: dict) -> bool:
    """Equal but for the audit record's helper: the record belongs to the call (measure_* first, then assert_*),
    the settings and every figure to the cached measurement (issue 36)."""
    a, b = dict(loaded), dict(computed)
    settings = [{"allow_inconclusive": False, **d.pop("audit")["settings"]} for d in (a, b)]  # measure_* has none
    # (the helper's name is left out of both by without_cache_line / here)
    return a == b and settings[0] == settings[1]
