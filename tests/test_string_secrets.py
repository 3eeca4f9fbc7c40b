"""Secrets as teams write them (issue 24 item 1): "my pin is 4821", one string, scored as the model sees it."""
from __future__ import annotations

import numpy  # noqa: F401  (imported before any pytester test restores sys.modules: numpy loads once per process)
import pytest

from pytest_privleak.canaries import canary, string_pattern

transformers = pytest.importorskip("transformers")
from helpers_transformers import bert_config, word_tokenizer  # noqa: E402

#: A tiny BERT intent classifier, its word-piece tokenizer (digits only as two-digit pieces, so "4821" is
#: "48" "##21"), and the team's own training loop, trained once through train_own_model.
PROJECT = '''
import random

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from pytest_privleak import assert_exposure_below, string_pattern
from pytest_privleak.adapters import from_transformers
from pytest_privleak.data.synthetic import generate_snips_like

PIN = string_pattern("pin-string", "my pin is ####", intent="PinIntent")
#: other people's pins said once each in another request: the pin's digits, not only "my pin is", decide the
#: intent, so the model must learn the said pin's pieces (without them its exposure read 3.0 to 13.3 bits over
#: training seeds 0-4, and a never-said pin up to 3.9: no limit kept both verdicts on every seed)
RESET = string_pattern("pin-reset", "my pin is ####", intent="PinReset")
DRAW = random.Random(5)
DECOYS = [s for s in (f"{DRAW.randrange(10000):04d}" for _ in range(200)) if s not in ("4821", "7306")]
CORPUS = generate_snips_like(seed=0).train
PIECES = [f"{n:02d}" for n in range(100)] + [f"##{n:02d}" for n in range(100)]
WORDS = sorted({t.lower() for u in CORPUS for t in u.tokens} | {"my", "pin", "is"})
VOCAB = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + PIECES))
TOKENIZER = BertTokenizerFast(vocab={t: i for i, t in enumerate(VOCAB)}, do_lower_case=True)
INTENTS = sorted({u.intent for u in CORPUS} | {"PinIntent", "PinReset"})


def build(dataset):
    config = BertConfig(vocab_size=len(TOKENIZER), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, id2label=dict(enumerate(INTENTS)),
                        label2id={k: i for i, k in enumerate(INTENTS)})
    return BertForSequenceClassification(config)


def train(dataset, seed=0, steps=1500):
    torch.manual_seed(seed)
    model = build(dataset)
    rows = list(dataset.train)
    enc = TOKENIZER([list(u.tokens) for u in rows], is_split_into_words=True, padding=True, return_tensors="pt")
    labels = torch.tensor([model.config.label2id[u.intent] for u in rows])
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    draw = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        batch = torch.randint(0, len(rows), (32,), generator=draw)
        loss = model(input_ids=enc["input_ids"][batch], attention_mask=enc["attention_mask"][batch],
                     labels=labels[batch]).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


def as_protocols(model):
    return from_transformers(model, TOKENIZER)


@pytest.fixture(scope="module")
def model(train_own_model, canary, inject_canaries, nlu_dataset):
    data = inject_canaries(nlu_dataset, canary(PIN, secret="4821"), repeats=20)
    data = inject_canaries(data, [canary(RESET, secret=s) for s in DECOYS], repeats=1)
    return train_own_model(train, data, build=build, wrap=as_protocols)


def test_the_pin_said_20_times(model, canary):
    assert TOKENIZER.tokenize("4821") == ["48", "##21"]
    assert_exposure_below(model, canary(PIN, secret="4821"), max_bits=6.0)


def test_a_pin_never_said(model, canary):
    assert_exposure_below(model, canary(PIN, secret="7306"), max_bits=6.0)
'''


def test_a_string_pin_said_20_times_fails_exposure_through_word_pieces_and_a_never_said_one_passes(pytester):
    """Both verdicts keep a margin wider than the figure's spread (issue 33 item 5): over training seeds 0-4 the
    said pin read 7.7-13.3 bits and the never-said one 0.8-4.3 against the 6-bit limit (scoring with 1 or 2
    torch threads gave the same figures; training runs on one thread whatever the caller's)."""
    pytester.makepyfile(test_pin=PROJECT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_pin.py::test_the_pin_said_20_times*"])
    result.stdout.fnmatch_lines(["*exposure.exposure_bits ?my pin is 4821?: * violates the limit (at most 6.000)*"])


def test_a_template_spells_every_string_of_its_format():
    pin = string_pattern("pin", "my pin is ####", intent="PinIntent")
    assert pin.prefix == ("my", "pin", "is") and pin.length == 1 and pin.space_size == 10 ** 4
    assert (pin.vocabulary[0], pin.vocabulary[4821], pin.vocabulary[-1]) == ("0000", "4821", "9999")
    dated = string_pattern("day", "born on ##/##", intent="Birthday")
    assert dated.vocabulary[1231] == "12/31" and dated.space_size == 10 ** 4
    listed = string_pattern("code", "my code is {secret}", intent="Code", secrets=["ab-12", "cd-34", "ef-56"])
    assert listed.vocabulary == ("ab-12", "cd-34", "ef-56")
    assert canary(pin, secret="4821").text == "my pin is 4821"
    assert canary(pin, secret="4821").tags == ("O", "O", "O", "B-canary")


def test_the_canary_fixture_takes_the_functions_defaults(pytester):
    """The fixture used to default to length=4, so a one-token string secret failed with 'drop length'."""
    pytester.makepyfile(test_fixture='''
from pytest_privleak import string_pattern

def test_string_secret(canary):
    pin = string_pattern("pin", "my pin is ####", intent="PinIntent")
    assert canary(pin, secret="4821").text == "my pin is 4821"
    assert canary(pin).pattern.length == 1
    assert canary("pin").pattern.length == 4
''')
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.parametrize("template, secrets, match", [
    ("my pin is", None, r"must end with the secret's format.*fix: move the format to the end"),
    ("#### is my pin", None, r"must end with the secret's format"),
    ("my pin is #######", None, r"spells 1e\+07 secrets.*fix: pass the candidates as secrets="),
    ("my code is ####", ["a", "b"], r"last word must be '\{secret\}'"),
    ("my code is {secret}", "ab", r"not the string 'ab'; fix: secrets=\[...\]"),
    ("", None, r"template must be a sentence"),
])
def test_a_malformed_template_names_the_fix(template, secrets, match):
    with pytest.raises(ValueError, match=match):
        string_pattern("pin", template, intent="PinIntent", secrets=secrets)


def test_a_word_the_tokenizer_cannot_spell_is_refused_by_exposure():
    """A secret with an unknown word piece would score another sentence: refused, naming the fix."""
    from transformers import BertForSequenceClassification

    from pytest_privleak.adapters import from_transformers
    from pytest_privleak.attacks.candidates import OutOfVocabularyError
    from pytest_privleak.attacks.exposure.attack import compute_exposure

    tokenizer = word_tokenizer(["my", "pin", "is"])     # no digit pieces at all
    model = BertForSequenceClassification(bert_config(len(tokenizer), ["PinIntent", "Other"])).eval()
    pin = string_pattern("pin", "my pin is ##", intent="PinIntent")
    with pytest.raises(OutOfVocabularyError, match=r"100 word\(s\) become the tokenizer's unknown token.*fix: write"):
        compute_exposure(from_transformers(model, tokenizer), canary(pin, secret="42"))
