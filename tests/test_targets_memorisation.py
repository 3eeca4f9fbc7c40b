"""The default target memorises a repeated canary, which is what makes it a useful test subject.

Every 4-digit pin is scored exhaustively with ``loss_from_embeddings`` on
one-hot inputs ``W[ids]`` (canary-extraction-nlu §3.1, eq. 2 with a one-hot
``a``); a model that memorised the injected pin gives it one of the lowest losses.
"""
import itertools

import pytest
import torch

from pytest_privleak.attacks.candidates import rank_of
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target


def rank_of_secret(model, pin) -> int:
    """1-based rank of the true secret among all |V0|^n candidates by training loss (ties in its favour)."""
    vocabulary = pin.pattern.vocabulary
    choices = torch.tensor(model.token_ids(vocabulary))
    combos = torch.tensor(list(itertools.product(range(len(vocabulary)), repeat=pin.pattern.length)))
    prefix = torch.tensor(model.token_ids(pin.pattern.prefix)).expand(len(combos), -1)
    ids = torch.cat([prefix, choices[combos]], dim=1)
    W = model.input_embeddings()
    with torch.no_grad():
        losses = torch.cat([model.loss_from_embeddings(W[chunk], pin.intent, pin.tags)
                            for chunk in ids.split(2500)])
    true = combos.tolist().index(list(pin.secret_indices))
    return rank_of(losses[true], torch.cat([losses[:true], losses[true + 1:]]), ties="favour")


def test_rank_counts_strictly_better_candidates():
    class Fixed:
        """A stand-in whose loss is the candidate's first digit: pin '3 ...' has 3 * 10 better ones."""

        vocabulary = [str(d) for d in range(10)] + ["my", "pin", "code", "is"]

        def token_ids(self, tokens):
            return [self.vocabulary.index(t) for t in tokens]

        def input_embeddings(self):
            return torch.eye(len(self.vocabulary))

        def loss_from_embeddings(self, x, intent, tags):
            return x[:, 4, :10].argmax(-1).float()

    pin = canary("pin", 2, secret="3 7")
    assert rank_of_secret(Fixed(), pin) == 3 * 10 + 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_undefended_default_model_ranks_the_pin_first(seed):
    pin = canary("pin", 4, seed=seed)
    data = inject_canaries(generate_snips_like(seed=0), pin, repeats=100, seed=seed)
    model = train_target("joint-bilstm-crf", data, seed=seed, progress=False)
    assert rank_of_secret(model, pin) <= 3
    assert model.evaluate(data.test)["intent_accuracy"] > 0.95
