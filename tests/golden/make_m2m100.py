"""Writes tests/golden/m2m100/: Hugging Face M2M100 (`M2M100ForConditionalGeneration`, the
PyTorch class of `transformers`; NLLB-200's architecture) outputs for
tests/models/test_m2m100.py. Run by hand with torch and transformers==4.46.3 (never imported
by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_m2m100.py

The published checkpoint (facebook/nllb-200-distilled-600M: 12 + 12 layers, width 1024,
vocabulary 256,206, `pytorch_model.bin`) is far too big for the repository, so the fixture is
the same class at toy sizes (width 16, 2 encoder and 3 decoder layers of 4 and 2 heads, FFN
24 / 40, vocabulary 48, pad 1, eos 2, decoder start 2), every parameter random at a scale
where each part matters, saved with `save_pretrained(..., safe_serialization=False)` as
`pytorch_model.bin` like the hub's file. Inputs: token ids with a padded row (pad 1 at its
tail) and decoder ids. Outputs: the teacher-forced logits, the encoder's last states, and
`generate` sequences: greedy and 3-beam, each with `forced_bos_token_id` (as NLLB forces
the target language's code first), `max_length` 12. A random model this small never ends a
sentence, so `eos/` holds a second one (seed 19, the </s> row of the shared embedding
scaled by 2.85: found by a search over seeds for rows that end at different steps) with
its greedy and 3-beam outputs on six sources, where </s> ends most rows early and ranks
second elsewhere. `full_keys.json` is the {key: shape} of transformers' class built on
torch's meta device from the published config values below (no weights are made or saved).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import M2M100Config, M2M100ForConditionalGeneration

HERE = Path(__file__).resolve().parent / "m2m100"
# facebook/nllb-200-distilled-600M's config.json
NLLB_600M = dict(vocab_size=256206, d_model=1024, encoder_layers=12, decoder_layers=12,
                 encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                 decoder_ffn_dim=4096, max_position_embeddings=1024, scale_embedding=True,
                 activation_function="relu", pad_token_id=1, bos_token_id=0, eos_token_id=2,
                 decoder_start_token_id=2, tie_word_embeddings=True)
TINY = dict(vocab_size=48, d_model=16, encoder_layers=2, decoder_layers=3,
            encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=24,
            decoder_ffn_dim=40, max_position_embeddings=32, scale_embedding=True,
            activation_function="relu", pad_token_id=1, bos_token_id=0, eos_token_id=2,
            decoder_start_token_id=2, dropout=0.0, attention_dropout=0.0,
            activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
FORCED = 7  # the "target language" token forced first


def random_model(seed: int) -> M2M100ForConditionalGeneration:
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(M2M100Config(**TINY)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            # small embeddings: with the tied output layer larger ones make a random model
            # repeat its forced first token; these give greedy and beam outputs that differ
            scale = 0.05 if "embed" in name or "shared" in name else 0.2
            p.copy_(torch.randn_like(p) * scale + (1.0 if name.endswith("layer_norm.weight")
                                                   else 0.0))
    return model


def main() -> None:
    HERE.mkdir(parents=True, exist_ok=True)
    model = random_model(0)
    model.save_pretrained(HERE, safe_serialization=False)
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 48, (3, 9))
    ids[:, -1] = 2  # </s>, as the tokenizer ends every source
    ids[1, 6:] = 1  # a padded row
    ids[1, 5] = 2
    mask = (ids != 1).astype(np.int64)
    dec = np.concatenate([np.full((3, 1), 2), np.full((3, 1), FORCED),
                          rng.integers(3, 48, (3, 5))], 1)
    t = torch.from_numpy
    with torch.no_grad():
        out = model(input_ids=t(ids), attention_mask=t(mask), decoder_input_ids=t(dec))
        greedy = model.generate(t(ids), attention_mask=t(mask), max_length=12, num_beams=1,
                                do_sample=False, forced_bos_token_id=FORCED)
        beam = model.generate(t(ids), attention_mask=t(mask), max_length=12, num_beams=3,
                              do_sample=False, forced_bos_token_id=FORCED, length_penalty=0.0,
                              early_stopping=True)
    np.savez(HERE / "io.npz", input_ids=ids, attention_mask=mask, decoder_input_ids=dec,
             logits=out.logits.numpy(), encoder_last_hidden_state=(
                 out.encoder_last_hidden_state.numpy()),
             greedy=greedy.numpy(), beam=beam.numpy())
    with torch.device("meta"):
        full = M2M100ForConditionalGeneration(M2M100Config(**NLLB_600M))
    keys = {k: list(v.shape) for k, v in full.state_dict().items()}
    (HERE / "full_keys.json").write_text(json.dumps(keys, indent=0, sort_keys=True))
    (HERE / "meta.json").write_text(json.dumps({
        "torch": torch.__version__, "transformers": transformers.__version__,
        "tiny": TINY, "forced_bos": FORCED, "full": NLLB_600M}, indent=1))
    print("wrote", sorted(p.name for p in HERE.iterdir()), greedy.tolist(), beam.tolist())
    eos_fixture()


def eos_fixture() -> None:
    model = random_model(19)
    with torch.no_grad():
        model.model.shared.weight[2] *= 2.85  # </s> likelier: sentences end
    out = HERE / "eos"
    model.save_pretrained(out, safe_serialization=False)
    rng = np.random.default_rng(19)
    ids = rng.integers(3, 48, (6, 9))
    ids[:, -1] = 2
    ids[1, 6:], ids[1, 5] = 1, 2
    ids[4, 4:], ids[4, 3] = 1, 2
    mask = (ids != 1).astype(np.int64)
    t = torch.from_numpy
    with torch.no_grad():
        greedy = model.generate(t(ids), attention_mask=t(mask), max_length=12, num_beams=1,
                                do_sample=False, forced_bos_token_id=FORCED)
        beam = model.generate(t(ids), attention_mask=t(mask), max_length=12, num_beams=3,
                              do_sample=False, forced_bos_token_id=FORCED, length_penalty=0.0,
                              early_stopping=True)
    np.savez(out / "io.npz", input_ids=ids, attention_mask=mask, greedy=greedy.numpy(),
             beam=beam.numpy())
    print("eos:", greedy.tolist(), beam.tolist())


if __name__ == "__main__":
    main()
