"""The transformers encoder adapter (adapters/encoder.py): masked mean pooling, batching, dtype, refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402

from pytest_privleak.adapters import from_transformers  # noqa: E402
from pytest_privleak.adapters.encoder import TransformersEncoder  # noqa: E402
from pytest_privleak.finite import NonFiniteError  # noqa: E402
from pytest_privleak.protocols import Encoder  # noqa: E402

TEXTS = ["ct scan of the leg", "112233199001011234", "repair of fracture of the hip with contrast", "acgt"]


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return tiny_encoder(seed=3)


def test_from_transformers_gives_an_encoder_for_a_model_without_a_head(tiny):
    adapter = from_transformers(tiny.model, tiny.tokenizer, batch_size=2)
    assert isinstance(adapter, TransformersEncoder) and isinstance(adapter, Encoder)
    assert adapter.describe()["pooling"] == "mean"


def test_masked_mean_matches_a_hand_written_pooling_and_ignores_batching(tiny):
    by_two = from_transformers(tiny.model, tiny.tokenizer, batch_size=2).encode(TEXTS)
    whole = from_transformers(tiny.model, tiny.tokenizer, batch_size=64).encode(TEXTS)
    with torch.no_grad():
        hand = []
        for text in TEXTS:                               # one text at a time: no padding at all
            ids = tiny.tokenizer(text, return_tensors="pt")
            hand.append(tiny.model(**ids).last_hidden_state[0].mean(dim=0).numpy())
    assert by_two.shape == (len(TEXTS), 32) and by_two.dtype == np.float32
    np.testing.assert_allclose(by_two, np.stack(hand), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(whole, by_two, rtol=1e-5, atol=1e-6)


def test_normalize_gives_unit_vectors_and_bfloat16_models_are_read_in_float32(tiny):
    unit = from_transformers(tiny.model, tiny.tokenizer, normalize=True).encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    half = tiny_encoder(seed=3)
    half.model.to(torch.bfloat16)
    low = half.encode(TEXTS)
    assert low.dtype == np.float32
    # bfloat16 keeps 8 bits of mantissa: agreement at about 1e-2 relative
    ref = tiny.encode(TEXTS)
    assert np.abs(low - ref).max() <= 0.05 * np.abs(ref).max()


def test_non_finite_embeddings_are_refused():
    broken = tiny_encoder(seed=1)
    with torch.no_grad():
        broken.model.embeddings.word_embeddings.weight[5:] = float("nan")
    with pytest.raises(NonFiniteError, match=r"embeddings of BertModel.*Fix: check the encoder's weights"):
        broken.encode(TEXTS)


def test_empty_input_gives_an_empty_array(tiny):
    assert tiny.encode([]).shape == (0, 32)
