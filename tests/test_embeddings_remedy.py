"""The embedding assertions' remedies name the §VII defences with their measured utility cost and its source."""
from __future__ import annotations

import pytest

from pytest_privleak.embeddings import defence_costs
from pytest_privleak.embeddings.inversion_assertion import remedy as inversion_remedy
from pytest_privleak.embeddings.keyword_assertion import remedy as keyword_remedy

ROWS = {"encoder": "enc", "date": "2026-11-23", "l1_sensitivity": 1.0,
        "rows": {"none": {"keyword": 0.99, "month": 0.46, "utility": 0.97},
                 "rounded(decimals=1)": {"keyword": 0.6, "month": 0.1, "utility": 0.5},
                 "subspace_projection(beta=0.05)": {"keyword": 0.55, "month": 0.45, "utility": 0.95}}}


def test_cost_summary_by_hand(monkeypatch):
    monkeypatch.setattr(defence_costs, "MEASURED", ROWS)
    text = defence_costs.cost_summary("keyword")
    assert text.startswith("measured on enc by bench/bench_defence_costs.py (2026-11-23")
    assert "rounded(decimals=1): keyword attack 0.99 -> 0.60, utility 0.97 -> 0.50 (cost +0.47)" in text
    assert "subspace_projection(beta=0.05): keyword attack 0.99 -> 0.55, utility 0.97 -> 0.95 (cost +0.02)" in text
    assert "month attack 0.46 -> 0.10" in defence_costs.cost_summary("month")


def test_without_stored_figures_the_remedy_says_how_to_measure_them(monkeypatch):
    monkeypatch.setattr(defence_costs, "MEASURED", None)
    assert "python bench/bench_defence_costs.py --write" in keyword_remedy()


@pytest.mark.parametrize("remedy", [inversion_remedy, keyword_remedy])
def test_the_shipped_remedies_quote_every_defence_with_its_measured_cost(remedy):
    assert defence_costs.MEASURED is not None, "run python bench/bench_defence_costs.py --write"
    text = remedy()
    for defence in ("rounded(", "laplace_noise(", "privacy_preserving_mapping(", "subspace_projection("):
        assert defence in text.split("Defence costs", 1)[1], text
    assert "utility" in text and "cost" in text and "bench/bench_defence_costs.py" in text
