"""What the §VII defences cost and buy, as measured by ``bench/bench_defence_costs.py --write``.

The remedies of the embedding assertions quote these rows so that a failing
test names each defence WITH its measured price (privacy-risks-language-model-
embeddings §VII: "such a utility-privacy trade-off seems unavoidable"). The
rows are one encoder's (named in ``MEASURED``); a team measures its own with
:func:`~.utility.measure_utility` on the wrapped encoder. Keys of each row:
``keyword`` (white-box keyword inference accuracy, chance 0.5), ``month``
(Citizen-ID month top-1, chance 0.083), ``utility`` (department task accuracy).
"""
from __future__ import annotations

MEASURED = {'encoder': 'all-MiniLM-L6-v2',
 'date': '2026-11-23',
 'l1_sensitivity': 18.114,
 'rows': {'none': {'keyword': 0.99, 'month': 0.308, 'utility': 1.0},
          'rounded(decimals=2)': {'keyword': 0.988, 'month': 0.3, 'utility': 1.0},
          'rounded(decimals=1)': {'keyword': 0.981, 'month': 0.228, 'utility': 1.0},
          'laplace_noise(epsilon=100)': {'keyword': 0.607, 'month': 0.102, 'utility': 0.306},
          'laplace_noise(epsilon=1000)': {'keyword': 0.988, 'month': 0.206, 'utility': 1.0},
          'privacy_preserving_mapping(lam=0.01)': {'keyword': 0.99, 'month': 0.138, 'utility': 0.702},
          'subspace_projection(beta=0.05)': {'keyword': 0.464, 'month': 0.296, 'utility': 1.0}}}
# end of measured figures (bench/bench_defence_costs.py rewrites everything above this line from "MEASURED = ")


def cost_summary(attack: str) -> str:
    """One sentence per defence setting: the attack's figure and the utility, raw -> defended, and their source."""
    if not MEASURED:
        return ("no defence costs are stored yet; measure them with python bench/bench_defence_costs.py --write, "
                "or measure_utility on the wrapped encoder")
    rows = MEASURED["rows"]
    raw = rows["none"]
    parts = [f"{label}: {attack} attack {raw[attack]:.2f} -> {row[attack]:.2f}, utility {raw['utility']:.2f} -> "
             f"{row['utility']:.2f} (cost {raw['utility'] - row['utility']:+.2f})"
             for label, row in rows.items() if label != "none"]
    return (f"measured on {MEASURED['encoder']} by bench/bench_defence_costs.py ({MEASURED['date']}; department "
            f"task utility, chance ~0.1): " + "; ".join(parts))
