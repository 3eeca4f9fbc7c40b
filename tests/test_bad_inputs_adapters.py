"""Bad inputs of the transformers adapters and of membership inference: each gives a clear error naming the
argument / entry and the fix (issue 12), never a figure."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import bert_config, word_tokenizer  # noqa: E402

from pytest_privleak.adapters import classifier_adapter, from_transformers, language_model_adapter  # noqa: E402
from pytest_privleak.attacks.candidates import OutOfVocabularyError  # noqa: E402
from pytest_privleak.attacks.cea.attack import extract  # noqa: E402
from pytest_privleak.attacks.membership.assertion import assert_membership_auc_at_most, measure_membership  # noqa: E402
from pytest_privleak.canaries import canary, custom_pattern  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402
from pytest_privleak.finite import NonFiniteError  # noqa: E402

WORDS = ["my", "pin", "code", "is", *"0123456789", "hello", "world"]
INTENTS = ["PinIntent", "Other"]
TAGS = ["O", "B-canary", "I-canary"]
PIN = canary("pin", length=2, seed=0)


@pytest.fixture(scope="module")
def parts():
    from transformers import BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification

    torch.manual_seed(0)
    tokenizer = word_tokenizer(WORDS)
    intent = BertForSequenceClassification(bert_config(len(tokenizer), INTENTS)).eval()
    slots = BertForTokenClassification(bert_config(len(tokenizer), TAGS)).eval()
    mlm = BertForMaskedLM(bert_config(len(tokenizer), ["x"])).eval()
    return tokenizer, intent, slots, mlm


def nan_copy(model):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        next(p for n, p in broken.named_parameters() if "classifier" in n or "decoder" in n or "dense" in n).fill_(
            float("nan"))
    return broken


def u(tokens: str, tags=None, intent="PinIntent") -> Utterance:
    toks = tokens.split()
    return Utterance(toks, tags or ["O"] * len(toks), intent)


# --- adapters: construction ---------------------------------------------------------------

def test_model_that_is_not_a_model(parts):
    with pytest.raises(TypeError, match=r"model must be a loaded transformers model .*got str"):
        from_transformers("bert-base-uncased", parts[0])


def test_tokenizer_that_is_not_a_tokenizer(parts):
    with pytest.raises(TypeError, match=r"tokenizer must be a transformers tokenizer \(AutoTokenizer"):
        from_transformers(parts[1], {"my": 0})


def test_pair_of_two_sequence_classifiers(parts):
    tokenizer, intent, _, _ = parts
    with pytest.raises(TypeError, match=r"a pair is \(sequence classifier, token classifier\).*fix: "):
        from_transformers(intent, tokenizer, slot_model=copy.deepcopy(intent))


def test_default_label_names_cannot_map_intents(parts):
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = parts[0]
    model = BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=2))
    with pytest.raises(ValueError, match=r"LABEL_0.*fix: set config.label2id/id2label.*intent_labels="):
        from_transformers(model, tokenizer)


def test_joint_model_without_label_names(parts):
    tokenizer, intent, _, _ = parts

    class Joint(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = intent.bert

        def get_input_embeddings(self):
            return self.bert.get_input_embeddings()

        def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None):
            h = self.bert(input_ids=input_ids, inputs_embeds=inputs_embeds, attention_mask=attention_mask)
            return h.pooler_output[:, :2], h.last_hidden_state[..., :3]

    with pytest.raises(ValueError, match=r"intent_labels= and slot_labels="):
        from_transformers(Joint(), tokenizer)


def test_model_whose_inputs_embeds_path_differs_from_input_ids(parts):
    tokenizer, intent, _, _ = parts

    class Scaled(torch.nn.Module):
        """Multiplies its embeddings inside when given ids (as some models do), not for inputs_embeds."""

        def __init__(self):
            super().__init__()
            self.inner = copy.deepcopy(intent)

        def get_input_embeddings(self):
            return self.inner.get_input_embeddings()

        def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None):
            if input_ids is not None:
                inputs_embeds = self.get_input_embeddings()(input_ids) * 8.0
            out = self.inner(inputs_embeds=inputs_embeds, attention_mask=attention_mask).logits
            return out, out.unsqueeze(1).expand(-1, inputs_embeds.shape[1], -1)[..., :2]

    with pytest.raises(ValueError, match=r"different outputs for input_ids and for inputs_embeds.*fix: adapt"):
        from_transformers(Scaled(), tokenizer, intent_labels=INTENTS, slot_labels=["O", "B-canary"])


def test_batch_size_zero(parts):
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got 0"):
        classifier_adapter(parts[1], parts[0], batch_size=0)
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got 0"):
        language_model_adapter(parts[3], parts[0], batch_size=0)


def test_language_model_adapter_on_a_classifier(parts):
    with pytest.raises(TypeError, match=r"neither a causal nor a masked language model; fix: load it with"):
        language_model_adapter(parts[1], parts[0])


def test_classifier_options_on_a_language_model(parts):
    with pytest.raises(TypeError, match=r"intent_labels do not apply to a language model; fix: drop them"):
        from_transformers(parts[3], parts[0], intent_labels=INTENTS)


def test_masked_lm_with_a_tokenizer_without_mask_token(parts):
    tokenizer = copy.deepcopy(parts[0])
    tokenizer.mask_token = None
    with pytest.raises(ValueError, match=r"has no mask token.*fix: pass the masked LM's own tokenizer"):
        language_model_adapter(parts[3], tokenizer)


# --- adapters: use ----------------------------------------------------------------------------

def test_canary_token_of_several_word_pieces_is_named_with_its_pieces(parts):
    tokenizer, intent, _, _ = parts
    adapter = from_transformers(intent, tokenizer)
    colours = canary(custom_pattern("colour", ("my", "colour", "is"), ("0", "1"), 2, "PinIntent"), seed=0)
    with pytest.raises(OutOfVocabularyError, match=r"'colour' is 2 word pieces \['col', '##our'\].*fix: use canary"):
        adapter.require_single_pieces(colours.tokens)
    with pytest.raises(OutOfVocabularyError, match=r"'colour'"):
        extract(adapter, colours, method="exhaustive")


def test_unknown_intent_names_the_intent_and_the_known_ones(parts):
    tokenizer, intent, _, _ = parts
    adapter = from_transformers(intent, tokenizer)
    with pytest.raises(ValueError, match=r"intent 'Weather' \(row 0\) is not a class.*\['Other', 'PinIntent'\].*fix"):
        adapter.score([u("hello world", intent="Weather")])


def test_unknown_tag_names_the_tag(parts):
    tokenizer, _, slots, _ = parts
    adapter = from_transformers(slots, tokenizer)
    with pytest.raises(ValueError, match=r"tag 'B-city' \(row 0\) is not a class of the token classifier.*fix"):
        adapter.score([u("hello world", ["B-city", "O"])])


def test_embeddings_of_the_wrong_width(parts):
    tokenizer, intent, slots, _ = parts
    adapter = from_transformers(intent, tokenizer, slot_model=slots)
    with pytest.raises(ValueError, match=r"embeddings must be a \[B, L, 64\] tensor, got \[1, 2, 32\]"):
        adapter.loss_from_embeddings(torch.zeros(1, 2, 32), ["PinIntent"], [["O", "O"]])


def test_tags_of_the_wrong_length(parts):
    tokenizer, intent, slots, _ = parts
    adapter = from_transformers(intent, tokenizer, slot_model=slots)
    with pytest.raises(ValueError, match=r"tags\[0\] has 1 tags for rows of 2 tokens"):
        adapter.loss_from_embeddings(torch.zeros(1, 2, 64), ["PinIntent"], [["O"]])


def test_score_of_something_that_is_not_an_utterance(parts):
    adapter = from_transformers(parts[1], parts[0])
    with pytest.raises(TypeError, match=r"utterances\[1\] is str, expected an Utterance"):
        adapter.score([u("hello"), "hello world"])


def test_token_the_tokenizer_deletes_is_named_with_the_fix(parts):
    """A lone combining accent passes the utterance checks but BERT's normaliser deletes it: no piece to score."""
    adapter = from_transformers(parts[1], parts[0])
    with pytest.raises(ValueError, match=r"utterance 1 .*no piece for the token '\u0301'.*fix: drop that token"):
        adapter.score([u("my pin"), Utterance(["my", "\u0301"], ["O", "O"], "PinIntent")])


def test_nan_classifier_is_refused_when_adapted_by_score_and_by_the_attack(parts):
    tokenizer, intent, _, _ = parts
    with pytest.raises(NonFiniteError, match=r"logits of BertForSequenceClassification.*Fix: check the model"):
        from_transformers(nan_copy(intent), tokenizer)
    model = copy.deepcopy(intent)
    adapter = from_transformers(model, tokenizer)
    with torch.no_grad():
        model.classifier.weight.fill_(float("inf"))          # broken after it was adapted
    with pytest.raises(NonFiniteError, match=r"training loss of BertForSequenceClassification.*Fix: check"):
        adapter.score([u("my pin code is 1 2")])
    with pytest.raises(NonFiniteError, match=r"training loss of BertForSequenceClassification on embeddings"):
        extract(adapter, PIN, method="exhaustive")


def test_nan_language_model_is_refused(parts):
    tokenizer, _, _, mlm = parts
    with pytest.raises(NonFiniteError, match=r"log-probabilities of BertForMaskedLM.*Fix: check"):
        language_model_adapter(nan_copy(mlm), tokenizer).score([u("my pin code is 1 2")])


# --- membership ------------------------------------------------------------------------------

class Table:
    def __init__(self, losses):
        self.losses = losses

    def score(self, utterances):
        return np.array([self.losses[x.text] for x in utterances])


MEMBERS = [u(f"hello {d}") for d in "0123456789"]
NON = [u(f"world {d}") for d in "0123456789"]
LOSSES = {x.text: float(i) for i, x in enumerate(MEMBERS + NON)}


def test_empty_members():
    with pytest.raises(ValueError, match=r"members is empty; fix: pass at least one utterance"):
        measure_membership(Table(LOSSES), [], NON)


def test_members_given_as_a_string():
    with pytest.raises(TypeError, match=r"non_members must be a sequence of utterances \(e.g. dataset.train\)"):
        measure_membership(Table(LOSSES), MEMBERS, "world 1")


def test_overlapping_members_and_non_members():
    with pytest.raises(ValueError, match=r"share 1 utterance\(s\), e.g. 'hello 3'.*fix: drop the shared"):
        measure_membership(Table(LOSSES), MEMBERS, NON + [MEMBERS[3]])


def test_nan_losses_of_the_target():
    losses = dict(LOSSES, **{"world 2": float("nan")})
    with pytest.raises(NonFiniteError, match=r"the target model's losses \(Table.score\).*Fix: check the model"):
        measure_membership(Table(losses), MEMBERS, NON)


def test_infinite_losses_of_the_reference():
    losses = dict(LOSSES, **{"hello 2": float("inf")})
    with pytest.raises(NonFiniteError, match=r"the reference model's losses"):
        measure_membership(Table(LOSSES), MEMBERS, NON, reference=Table(losses))


def test_scorer_returning_too_few_scores():
    class Short(Table):
        def score(self, utterances):
            return super().score(utterances)[:-1]

    with pytest.raises(ValueError, match=r"returned 9 scores for 10 utterances; fix: score\(\) must return one"):
        measure_membership(Short(LOSSES), MEMBERS, NON)


def test_scorer_without_score():
    with pytest.raises(TypeError, match=r"is not a SequenceScorer; give it score\(utterances\)"):
        measure_membership(object(), MEMBERS, NON)


@pytest.mark.parametrize("argument, value, pattern", [
    ("max_auc", 1.5, r"max_auc must be a number in \[0, 1\] \(chance is 0.5\), got 1.5"),
    ("max_tpr_at_fpr", -0.1, r"max_tpr_at_fpr must be a number in \[0, 1\]"),
    ("fpr", 0.0, r"fpr must be a false-positive rate in \(0, 1\), e.g. 0.01"),
    ("confidence", 1.5, r"confidence must lie in \(0, 1\)"),
    ("tolerance", -1.0, r"tolerance must be a number >= 0 or None"),
    ("name", "", r"name must be a non-empty string or None"),
])
def test_bad_assertion_arguments(argument, value, pattern):
    kwargs = {"max_auc": 0.6, argument: value}
    with pytest.raises(ValueError, match=pattern):
        assert_membership_auc_at_most(Table(LOSSES), MEMBERS, NON, **kwargs)


def test_tpr_gate_with_too_few_non_members():
    with pytest.raises(ValueError, match=r"needs at least 100 non-members, got 10; fix: pass more held-out"):
        assert_membership_auc_at_most(Table(LOSSES), MEMBERS, NON, 0.6, max_tpr_at_fpr=0.05, fpr=0.01)


# --- prefix_outputs (a recurrent layer over a canary space, the prefix once: issue 35 item 4) ---------------


@pytest.mark.parametrize("rnn, prefix, words, choices, pattern", [
    (torch.nn.Linear(5, 7), torch.zeros(2, 5), torch.zeros(3, 5), [[0, 1]],
     r"rnn must be a torch recurrent layer \(nn.GRU, nn.LSTM or nn.RNN\), got Linear"),
    (torch.nn.GRU(5, 7), torch.zeros(2, 5), torch.zeros(3, 5), [0, 1],
     r"choices must be \[B, n\] indices into word_inputs, got shape \[2\]; fix: one row of word indices"),
    (torch.nn.GRU(5, 7), torch.zeros(2, 5), torch.zeros(3, 5), [[0, 3]],
     r"choices hold indices outside word_inputs \(0 .. 2\)"),
    (torch.nn.GRU(5, 7), torch.zeros(2, 4), torch.zeros(3, 5), [[0, 1]],
     r"prefix_inputs \[m, d\] and word_inputs \[\|V\|, d\] must be matrices of one width d, got \[2, 4\] and "
     r"\[3, 5\]"),
])
def test_prefix_outputs_refuses_what_it_cannot_read(rnn, prefix, words, choices, pattern):
    from pytest_privleak.adapters.recurrent_prefix import prefix_outputs

    with pytest.raises((TypeError, ValueError), match=pattern):
        prefix_outputs(rnn, prefix, words, torch.tensor(choices))
