"""End to end (issue 26): a change of training seed alone fails the one-draw gate on a noisy figure and passes
the default gate (DEFAULT_SEEDS seeds); a baseline saved with another seed count is refused by name."""
import json

import pytest

from pytest_privleak.plugin.seeds import DEFAULT_SEEDS

# The loss attack's AUC on 10 members (loss i) and 10 non-members (loss j + shift - 0.5):
# shift 1 gives 0.55, shift 2 gives 0.64. The planted "training" alternates them by seed, so every
# seed range has the same spread and only the draw differs: seeds 0..4 and 10..14 are the same pipeline.
TEST_FILE = """
import numpy as np
from pytest_privleak import measure_membership
from pytest_privleak.targets.seeds import train_over_seeds

SHIFT = {s: 1 + (s + (s >= 10)) % 2 for s in range(20)}


class Planted:
    def __init__(self, shift):
        self.shift = shift

    def score(self, utterances):
        return np.array([float(u.text[1:]) + (0.0 if u.text[0] == "m" else self.shift - 0.5) for u in utterances])


def test_auc(privleak_seed, privleak_seeds):
    models = train_over_seeds(lambda s: Planted(SHIFT[s]), privleak_seeds, seed=privleak_seed, name="planted")
    target = models[0] if privleak_seeds == 1 else models
    measure_membership(target, [f"m{i}" for i in range(10)], [f"n{i}" for i in range(10)], name="planted")
"""


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "pytest_privleak.plugin.seeds", "-p", "no:cacheprovider", *args)


@pytest.mark.slow  # five pytest runs in subprocesses: about 80 s on the shared CI machine
def test_seed_only_change_fails_one_draw_and_passes_over_seeds(pytester, monkeypatch):
    monkeypatch.delenv("PRIVLEAK_SEEDS", raising=False)  # the built-in default, whatever the suite's environment
    pytester.makepyfile(test_planted=TEST_FILE)
    # one draw: seed 0 (AUC 0.55) against seed 10 (AUC 0.64): moved 0.09, beyond the 0.05 tolerance
    assert _run(pytester, "--privleak-seeds", "1", "--privleak-seed", "0",
                "--privleak-save-baseline", "one.json").ret == 0
    one = _run(pytester, "--privleak-seeds", "1", "--privleak-seed", "10", "--privleak-baseline", "one.json")
    assert one.ret == 1
    one.stdout.fnmatch_lines(["*REGRESSION*membership.auc*before 0.550, after 0.640*"])
    # the default seed count (no option): seeds 0..k-1 against 10..10+k-1, the same spread, so the Welch test
    # sees no shift (k = 7: means 0.589 and 0.601, s = 0.048 on both sides, t = 0.50, p = 0.31)
    assert DEFAULT_SEEDS > 1
    assert _run(pytester, "--privleak-save-baseline", "default.json").ret == 0
    saved = json.loads((pytester.path / "default.json").read_text())
    (entry,) = [r for t in saved["tests"] for r in t["results"]]
    assert entry["per_seed"] == [0.55 if s % 2 == 0 else 0.64 for s in range(DEFAULT_SEEDS)]
    again = _run(pytester, "--privleak-seed", "10", "--privleak-baseline", "default.json")
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(
        ["*baseline gate passed*1 over training seeds, by the seed rule at alpha 0.05*"])
    # another seed count against this baseline is refused, naming both
    mixed = _run(pytester, "--privleak-seeds", "3", "--privleak-baseline", "default.json")
    assert mixed.ret != 0
    mixed.stdout.fnmatch_lines([f"*saved with {DEFAULT_SEEDS} training seed(s) (k={DEFAULT_SEEDS}) and this run "
                                "measured 3 (k=3)*"])


def test_bad_seed_count_is_a_usage_error(pytester):
    pytester.makepyfile(test_planted=TEST_FILE)
    result = _run(pytester, "--privleak-seeds", "0")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--privleak-seeds='0' must be at least 1*"])


def test_the_environment_variable_sets_the_count_below_the_option(pytester, monkeypatch):
    pytester.makepyfile(test_planted=TEST_FILE.replace(
        "def test_auc(privleak_seed, privleak_seeds):",
        "def test_count(privleak_seeds):\n    print('COUNT', privleak_seeds)\n\n\ndef test_auc(privleak_seed, privleak_seeds):"))
    pytester.makeini("[pytest]\nprivleak_seeds = 4\n")
    monkeypatch.setenv("PRIVLEAK_SEEDS", "2")
    _run(pytester, "-s", "-k", "count").stdout.fnmatch_lines(["*COUNT 2*"])     # the variable beats the ini
    _run(pytester, "-s", "-k", "count", "--privleak-seeds=3").stdout.fnmatch_lines(["*COUNT 3*"])  # the option both
    monkeypatch.delenv("PRIVLEAK_SEEDS")
    _run(pytester, "-s", "-k", "count").stdout.fnmatch_lines(["*COUNT 4*"])
    monkeypatch.setenv("PRIVLEAK_SEEDS", "none")
    bad = _run(pytester, "-k", "count")
    assert bad.ret == 4
    bad.stderr.fnmatch_lines(["*environment variable PRIVLEAK_SEEDS='none' is not an integer*"])
