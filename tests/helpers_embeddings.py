"""A tiny BERT encoder built from a config for the embedding-leakage tests (no download).

Its tokenizer splits digit strings and nucleotide strings into one piece per
character (as MiniLM's WordPiece splits IDs into short pieces), and knows the
words of the generated medical, airline and restaurant corpora. Weights are
random (seeded): mean pooling of a random 2-layer transformer keeps which
piece sits where well enough for the §V attacks to beat chance by far, which
is what the CI tests need (a leaking encoder), while staying fast on a CPU.
"""
from __future__ import annotations

import torch

from helpers_transformers import bert_config, word_tokenizer

from pytest_privleak.adapters.encoder import TransformersEncoder
from pytest_privleak.embeddings.corpora import corpus_vocabulary

CHARS = list("0123456789acgt")


def tiny_tokenizer():
    return word_tokenizer(CHARS + [f"##{c}" for c in CHARS] + corpus_vocabulary())


def tiny_encoder(*, hidden: int = 32, seed: int = 0) -> TransformersEncoder:
    from transformers import BertModel

    torch.manual_seed(seed)
    tokenizer = tiny_tokenizer()
    model = BertModel(bert_config(len(tokenizer), ["x"], hidden_size=hidden, num_hidden_layers=2,
                                  intermediate_size=2 * hidden, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, max_position_embeddings=64))
    return TransformersEncoder(model, tokenizer, batch_size=256)
