"""Local differential privacy: mechanisms, the black-box ε auditor, white-box exact ε, the HoHo attack.

Public entry points: :func:`assert_ldp_holds` (the test assertion),
:func:`measure_ldp` (the same audit, recorded without a verdict),
:func:`hoho_results` (HoHo figures for reports), the built-in mechanisms
(:class:`OME`, :class:`SUE`, :class:`OUE`, :class:`KRR`,
:class:`BoundedLaplace`) and the :class:`Mechanism` protocol users implement.
"""
from .assertion import assert_ldp_holds, ldp_result, measure_ldp
from .auditor import AuditResult, audit
from .diagnostics import LDPAuditWarning
from .exact import ome_corrected_bound, pair_epsilon, worst_case_epsilon
from .hoho import hoho_results
from .labels import mechanism_label
from .mechanisms import (OME, OUE, SUE, BitProductMechanism, BoundedLaplace, BoxDomain, FiniteDomain, KRR,
                         Mechanism)

__all__ = [
    "assert_ldp_holds", "measure_ldp", "LDPAuditWarning", "mechanism_label", "ldp_result", "audit", "AuditResult",
    "pair_epsilon", "worst_case_epsilon", "ome_corrected_bound", "hoho_results", "Mechanism", "BitProductMechanism", "BoxDomain", "FiniteDomain",
    "OME", "SUE", "OUE", "KRR", "BoundedLaplace",
]
