"""Bad ``dp=`` arguments of the DP-SGD targets (issue 25 item 4): each error names the argument and the fix.

Every case failed on the code before item 4, where ``dp`` was an unknown config
key of every kind (one generic ``TypeError``), so no case below matched it.
Nothing is trained: the config is checked before the cache or the data is touched.
"""
from __future__ import annotations

import sys

import pytest

from pytest_privleak.data.types import NLUDataset, Utterance
from pytest_privleak.targets import train_target

KINDS = ("joint-bilstm-crf", "transformer-classifier")


@pytest.fixture(scope="module")
def data():
    train = (Utterance(("play", "jazz"), ("O", "B-genre"), "PlayMusic"),
             Utterance(("rain", "today"), ("O", "B-date"), "GetWeather"))
    return NLUDataset(train, train, ())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dp, error, named", [
    ({"epsilon": 8, "delta": 1e-5, "noise": 1.0}, TypeError, r"unknown dp key\(s\) \['noise'\]; accepted keys: "
                                                             r"epsilon, delta, max_grad_norm, accountant"),
    ({"delta": 1e-5}, TypeError, r"missing \['epsilon'\].*fix: give the privacy target"),
    ({"epsilon": 8}, TypeError, r"missing \['delta'\]"),
    (8, TypeError, r"dp must be a dict such as \{'epsilon': 8"),
    ("epsilon=8", TypeError, r"dp must be a dict"),
    ({"epsilon": 0, "delta": 1e-5}, ValueError, r"epsilon=0 must be a finite number > 0.*fix: e.g. epsilon=8"),
    ({"epsilon": -1.0, "delta": 1e-5}, ValueError, r"epsilon=-1.0 must be a finite number > 0"),
    ({"epsilon": float("inf"), "delta": 1e-5}, ValueError, r"epsilon=inf must be a finite number > 0"),
    ({"epsilon": float("nan"), "delta": 1e-5}, ValueError, r"epsilon=nan must be a finite number > 0"),
    ({"epsilon": True, "delta": 1e-5}, ValueError, r"epsilon=True must be a finite number > 0"),
    ({"epsilon": "8", "delta": 1e-5}, ValueError, r"epsilon='8' must be a finite number > 0"),
    ({"epsilon": 8, "delta": 0}, ValueError, r"delta=0 must be a number in \(0, 1\).*fix: e.g. delta=1e-5"),
    ({"epsilon": 8, "delta": 1}, ValueError, r"delta=1 must be a number in \(0, 1\)"),
    ({"epsilon": 8, "delta": 1.5}, ValueError, r"delta=1.5 must be a number in \(0, 1\)"),
    ({"epsilon": 8, "delta": -1e-5}, ValueError, r"delta=-1e-05 must be a number in \(0, 1\)"),
    ({"epsilon": 8, "delta": 1e-5, "max_grad_norm": 0}, ValueError,
     r"max_grad_norm=0 must be a finite number > 0 \(the per-sample clipping norm\); fix: e.g. max_grad_norm=1.0"),
    ({"epsilon": 8, "delta": 1e-5, "max_grad_norm": -1.0}, ValueError, r"max_grad_norm=-1.0 must be"),
    ({"epsilon": 8, "delta": 1e-5, "accountant": "gdp"}, ValueError, r"accountant='gdp' is not one of"),
])
def test_a_bad_dp_argument_is_named_with_the_fix(kind, data, dp, error, named):
    with pytest.raises(error, match=rf"train_target\('{kind}', \.\.\..*{named}"):
        train_target(kind, data, dp=dp)


@pytest.mark.parametrize("kind", KINDS)
def test_dp_without_opacus_names_the_extra_to_install(kind, data, monkeypatch):
    monkeypatch.setitem(sys.modules, "opacus", None)     # what an environment without the dp extra sees
    with pytest.raises(ImportError, match=r'Opacus, which is not installed; fix: pip install -e "\.\[dp\]"'):
        train_target(kind, data, dp={"epsilon": 8, "delta": 1e-5})


@pytest.mark.parametrize("kind", KINDS)
def test_no_dp_needs_no_opacus(kind, monkeypatch):
    """``dp=None`` (the paper's model) builds its config without importing Opacus."""
    from pytest_privleak.targets.joint_nlu import JointNLUConfig
    from pytest_privleak.targets.transformer_classifier import TransformerClassifierConfig

    monkeypatch.setitem(sys.modules, "opacus", None)
    config = {"joint-bilstm-crf": JointNLUConfig, "transformer-classifier": TransformerClassifierConfig}[kind]()
    assert config.dp is None and "dp" not in config.to_json()
