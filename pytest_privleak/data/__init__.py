"""Datasets for joint intent + slot models: types, loaders and a synthetic Snips-like corpus."""
from .bio import BIOError, validate_bio
from .loaders import DataFormatError, load_jsonl, load_jsonl_split, load_three_file, load_three_file_split
from .paths import fixtures_dir
from .synthetic import SNIPS_INTENTS, generate_snips_like
from .types import NLUDataset, Utterance

__all__ = [
    "BIOError", "DataFormatError", "NLUDataset", "SNIPS_INTENTS", "Utterance", "fixtures_dir",
    "generate_snips_like", "load_jsonl", "load_jsonl_split", "load_three_file", "load_three_file_split",
    "validate_bio",
]
