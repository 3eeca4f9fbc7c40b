"""Issue 37, end to end through the public fixtures: the joint model at 1 epoch, the default 7 training seeds,
a canary set of 8 pins (count=8): a change of the training seeds alone passes the gate, and the same pins said
4x as often (R 2 -> 8) at the new seeds fail it with a REGRESSION line.

The issue's run with ONE pin passed the R 2 -> 8 change ("gate passed", Welch t about 1.1): one secret's
exposure moves by several bits between training seeds. The set's mean over 8 pins and 7 seeds moves far less,
and the seed rule tests it at the same level."""
import pytest

TEST_FILE = """
import os

from pytest_privleak import assert_exposure_below


def test_pins_are_not_memorised(canary, inject_canaries, train_target, nlu_dataset):
    pins = canary("pin", count=8)                          # 8 distinct pins: the gate's tool
    data = inject_canaries(nlu_dataset, pins, repeats=int(os.environ["PIN_REPEATS"]))
    model = train_target("joint-bilstm-crf", data, epochs=1, seed=int(os.environ["TRAINING_SEED"]))
    assert_exposure_below(model, pins, max_bits=13.0, name="pin")
"""


def _run(pytester, monkeypatch, repeats, training_seed, *args):
    monkeypatch.setenv("PIN_REPEATS", str(repeats))
    monkeypatch.setenv("TRAINING_SEED", str(training_seed))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-seeds", "7", *args)


@pytest.mark.slow  # 21 joint models (1 epoch), 21 scorings of the 10^4 pins: 1070 s on the 2 shared cores at load 12
def test_a_4x_repeat_count_fails_the_gate_and_a_seed_change_does_not(pytester, monkeypatch):
    pytester.makepyfile(test_pins=TEST_FILE)
    saved = _run(pytester, monkeypatch, 2, 0, "--privleak-save-baseline", "main.json")
    assert saved.ret == 0, saved.stdout.str()
    seeds_only = _run(pytester, monkeypatch, 2, 50, "--privleak-baseline", "main.json")
    assert seeds_only.ret == 0, seeds_only.stdout.str()
    seeds_only.stdout.fnmatch_lines(["*baseline gate passed*1 over training seeds, by the seed rule*"])
    said_more = _run(pytester, monkeypatch, 8, 50, "--privleak-baseline", "main.json")
    assert said_more.ret == 1, said_more.stdout.str()
    # measured: before 2.634 (1.488 .. 4.734), after 4.440 (3.543 .. 5.125), p = 0.00583, moved 1.805 bits
    said_more.stdout.fnmatch_lines(["*REGRESSION*exposure.mean_exposure_bits [[]pin[]]: mean over 7 seeds*"
                                    "min-p of Welch t, seeds above the baseline's largest, largest canary growth*"])
