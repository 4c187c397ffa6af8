"""A tiny causal LM built locally, saved in Hugging Face format.

Nothing may be downloaded at run time on the machines Barrel is tested on, so CPU runs use a
model built from a config: a character-level tokenizer (``tokenizers`` WordLevel, one token per
character) and a small Llama initialised from a seed. Both are saved with ``save_pretrained``, so
the rest of the code (and vLLM) loads them exactly like any local model directory on a cluster.

    python -m workers.models.tiny --out /tmp/tiny-llama
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
# Every character the shipped tasks use; unknown characters map to <unk> rather than failing.
DEFAULT_ALPHABET = "0123456789+-*=?() abcdefghijklmnopqrstuvwxyz.,:\n"


@dataclass(frozen=True)
class TinySpec:
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    intermediate_size: int = 192
    max_positions: int = 64
    alphabet: str = DEFAULT_ALPHABET
    seed: int = 0

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def build_tokenizer(alphabet: str = DEFAULT_ALPHABET):  # type: ignore[no-untyped-def]  # transformers is untyped here
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, UNK]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # One token per character, spaces included.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        padding_side="left",
    )


def build_model(spec: TinySpec, vocab_size: int, bos_id: int, eos_id: int, pad_id: int):  # type: ignore[no-untyped-def]
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=spec.max_positions,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    torch.manual_seed(spec.seed)
    return LlamaForCausalLM(config)


def save_tiny_model(out: Path, spec: TinySpec = TinySpec()) -> Path:
    """Build and save a tiny model + tokenizer under ``out`` (created). Deterministic in ``spec``."""
    tokenizer = build_tokenizer(spec.alphabet)
    model = build_model(spec, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "barrel_tiny.json").write_text(json.dumps(asdict(spec), indent=2))
    return out


def default_cache_dir() -> Path:
    return Path(os.environ.get("BARREL_MODEL_CACHE") or Path.home() / ".cache" / "barrel" / "models")


def ensure_tiny_model(spec: TinySpec = TinySpec(), cache_dir: Path | None = None) -> Path:
    """The directory of the tiny model for ``spec``, built once per spec and reused.

    Several Ray actors may ask at once: each builds into a private temp dir and renames it into
    place, so a reader never sees a half-written model.
    """
    root = cache_dir or default_cache_dir()
    target = root / f"tiny-llama-{spec.digest()}"
    if (target / "config.json").exists() and (target / "tokenizer.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    save_tiny_model(staging, spec)
    try:
        staging.rename(target)
    except OSError:
        # Another process won the race; its copy is identical (same spec, same seed).
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return target


def materialise(path: str, tiny: dict[str, object] | None) -> str:
    """``path`` itself, built first on this node when it is a tiny model that is not here yet.

    On a multi-node cluster the driver's cache directory exists only on the driver's node; every
    actor rebuilds the same model (same spec, same seed, same bytes) at the same path instead of
    needing shared storage for it.
    """
    target = Path(path)
    if tiny is None or (target / "config.json").exists():
        return path
    spec = TinySpec(**tiny)  # type: ignore[arg-type]
    built = ensure_tiny_model(spec, cache_dir=target.parent)
    return str(built)


def main() -> None:
    parser = argparse.ArgumentParser(description="Build a tiny Llama and character tokenizer in HF format.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--hidden-size", type=int, default=TinySpec.hidden_size)
    parser.add_argument("--layers", type=int, default=TinySpec.layers)
    parser.add_argument("--seed", type=int, default=TinySpec.seed)
    args = parser.parse_args()
    path = save_tiny_model(args.out, TinySpec(hidden_size=args.hidden_size, layers=args.layers, seed=args.seed))
    print(f"saved tiny model to {path}")


if __name__ == "__main__":
    main()
