"""The train_target fixture over seeds, end to end: --privleak-seeds 3 trains three targets, the gate compares
their figures by the Welch test, the HTML report draws both sets, and a one-draw run against it is refused."""
import pytest

from pytest_privleak import plugin

TEST = """
from pytest_privleak import measure_exposure
from pytest_privleak.data.synthetic import generate_snips_like

def test_lm(train_target, canary, inject_canaries, privleak_seeds):
    pin = canary("pin", 4, seed=0)
    data = inject_canaries(generate_snips_like(n_train=200, n_valid=20, n_test=20), [pin], repeats=10, seed=0)
    target = train_target("lstm-lm", data, epochs=1, hidden_dim=16, embedding_dim=8)
    r = measure_exposure(target, pin, name="pin")
    assert len(r.per_seed) == (privleak_seeds if privleak_seeds > 1 else 0)
"""

pytestmark = pytest.mark.skipif("pytest_privleak.plugin.seeds" not in plugin.pytest_plugins,
                                reason="plugin/__init__.py does not register plugin/seeds.py yet (issue 26)")


@pytest.mark.slow  # three pytest runs training three small language models: about 40 s
def test_fixture_over_seeds(pytester):
    pytester.makepyfile(test_lm=TEST)
    saved = pytester.runpytest_subprocess("--privleak-seeds", "3", "--privleak-save-baseline", "b.json",
                                          "-p", "no:cacheprovider")
    assert saved.ret == 0, saved.stdout.str()
    again = pytester.runpytest_subprocess("--privleak-seeds", "3", "--privleak-baseline", "b.json",
                                          "--privleak-report=rep", "-p", "no:cacheprovider")
    again.stdout.fnmatch_lines(["*baseline gate passed*1 over training seeds*"])  # the same three models
    html = (pytester.path / "rep" / "index.html").read_text()
    assert "baseline seeds against this run" in html and html.count("<circle") == 6
    one = pytester.runpytest_subprocess("--privleak-seeds", "1", "--privleak-baseline", "b.json", "-p",
                                        "no:cacheprovider")
    one.stdout.fnmatch_lines(["*saved with 3 training seed(s) (k=3) and this run measured 1 (k=1)*"])
