"""CRF marginals by forward-backward in log space, against brute-force enumeration of all tag paths."""
import itertools

import pytest
import torch
from torchcrf import CRF

from pytest_privleak.targets.ner_tagger import crf_log_marginals


@pytest.fixture
def crf():
    torch.manual_seed(0)
    model = CRF(3, batch_first=True)
    with torch.no_grad():  # pytorch-crf initialises small; make transitions matter
        for p in (model.start_transitions, model.end_transitions, model.transitions):
            p.normal_(0, 1.5)
    return model


def brute_force(crf, emissions, length):
    """Pr[y_t = k] by summing exp(log-likelihood) over all n_tags^length paths of one sentence."""
    n_tags = emissions.shape[-1]
    out = torch.zeros(length, n_tags, dtype=torch.float64)
    em = emissions[:, :length]
    mask = torch.ones(1, length, dtype=torch.bool)
    for path in itertools.product(range(n_tags), repeat=length):
        p = crf(em, torch.tensor([path]), mask=mask, reduction="sum").exp().double()
        for t, k in enumerate(path):
            out[t, k] += p
    return out


def marginals(crf, emissions, mask):
    return crf_log_marginals(emissions, mask, crf.start_transitions, crf.end_transitions, crf.transitions).exp()


def test_marginals_match_brute_force_with_padding(crf):
    emissions = torch.randn(3, 4, 3, generator=torch.Generator().manual_seed(1)) * 2
    lengths = [4, 2, 1]
    mask = torch.arange(4).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    with torch.no_grad():
        got = marginals(crf, emissions, mask)
        for row, n in enumerate(lengths):
            expected = brute_force(crf, emissions[row:row + 1], n)
            torch.testing.assert_close(got[row, :n].double(), expected, rtol=1e-4, atol=1e-5)
            assert torch.all(got[row, n:] == 0)


def test_marginals_sum_to_one_and_argmax_path_is_viterbi_when_sharp(crf):
    emissions = torch.randn(5, 7, 3, generator=torch.Generator().manual_seed(2))
    mask = torch.ones(5, 7, dtype=torch.bool)
    with torch.no_grad():
        m = marginals(crf, emissions, mask)
        torch.testing.assert_close(m.sum(-1), torch.ones(5, 7))
        sharp = emissions * 50  # near-deterministic: marginal argmax equals the Viterbi path
        assert marginals(crf, sharp, mask).argmax(-1).tolist() == crf.decode(sharp, mask=mask)


def test_bad_masks_are_rejected(crf):
    emissions = torch.zeros(1, 2, 3)
    with pytest.raises(TypeError, match="bool"):
        crf_log_marginals(emissions, torch.ones(1, 2), crf.start_transitions, crf.end_transitions, crf.transitions)
    with pytest.raises(ValueError, match="at least one token"):
        crf_log_marginals(emissions, torch.tensor([[False, True]]), crf.start_transitions, crf.end_transitions,
                          crf.transitions)
