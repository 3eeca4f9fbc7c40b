"""Entity F1 as conlleval counts it (exact span and type, micro-averaged), and the tagger's F1 in its metadata."""
import pytest

from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.entity_f1 import entity_f1, entity_spans

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_spans_follow_conlleval_chunk_boundaries():
    assert entity_spans("B-PER I-PER O B-LOC".split()) == {(0, 2, "PER"), (3, 4, "LOC")}
    assert entity_spans("I-PER I-PER B-PER".split()) == {(0, 2, "PER"), (2, 3, "PER")}     # IOB1-style start
    assert entity_spans("B-PER I-ORG".split()) == {(0, 1, "PER"), (1, 2, "ORG")}          # type change
    assert entity_spans("S-PER B-ORG E-ORG S-LOC".split()) == {(0, 1, "PER"), (1, 3, "ORG"), (3, 4, "LOC")}
    assert entity_spans("B-ORG E-ORG I-ORG".split()) == {(0, 2, "ORG"), (2, 3, "ORG")}    # E- closes


def test_f1_counts_only_exact_span_and_type():
    gold = ["B-PER I-PER O B-LOC".split(), "B-ORG O O".split()]
    pred = ["B-PER O O B-LOC".split(), "B-LOC O B-PER".split()]
    # gold: 3 entities; predicted: 4 (B-PER alone is a wrong span, B-LOC right, ORG typed LOC, spurious PER)
    f = entity_f1(gold, pred)
    assert (f.n_gold, f.n_pred, f.n_correct) == (3, 4, 1)
    assert f.precision == pytest.approx(1 / 4) and f.recall == pytest.approx(1 / 3)
    assert f.f1 == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    assert entity_f1([["O"]], [["O"]]).f1 == 0.0
    with pytest.raises(ValueError, match="sequence 0: 2 gold tags but 1 predicted"):
        entity_f1([["O", "O"]], [["O"]])


def test_tagger_reports_viterbi_entity_f1_of_valid_and_test_in_its_metadata():
    data = generate_ner_like(n_train=300, n_valid=40, n_test=40, seed=3)
    model = train_target("ner-bilstm-crf", data, seed=0, progress=False, epochs=10)   # paper sizes
    f1 = model.describe()["entity_f1"]
    assert set(f1) == {"valid", "test"}
    assert f1["test"] == entity_f1([u.tags for u in data.test], model.viterbi_tags([u.tokens for u in data.test])
                                   ).to_json()
    assert f1["test"]["n_gold"] == sum(t != "O" for u in data.test for t in u.tags)   # one-word entities only
    assert f1["valid"]["f1"] > 0.85 and f1["test"]["f1"] > 0.85
