"""The real-model corpus of `make bench`: models built with the libraries people use (flax,
transformers' Flax classes, diffusers, equinox), randomly initialised from a config (no
weight download), lowered by JAX to pre-optimization HLO text with their inputs.

    python bench/corpus.py OUT_DIR [--models NAME ...]

writes OUT_DIR/NAME/module.hlo, OUT_DIR/NAME/inputs.npz (in0, in1, ... in parameter order:
the parameters' leaves, then the model's inputs) and OUT_DIR/NAME/model.json (description,
library versions, input shapes). Needs the bench venv (tools/requirements-fixtures.txt and
bench/requirements.txt); vxla itself never imports these libraries.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BATCH_SEQUENCE = 128  # tokens of the text models


@dataclass(frozen=True)
class CorpusModel:
    name: str
    library: str
    description: str
    build: Callable[[], tuple[Callable, list]]  # (function of the flat leaves, the leaves)


def _flat(apply: Callable, params, *inputs) -> tuple[Callable, list]:
    """A function of the flattened parameter leaves followed by `inputs`, and those arrays."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(params)
    count = len(leaves)

    def function(*arrays):
        return apply(jax.tree_util.tree_unflatten(tree, list(arrays[:count])), *arrays[count:])

    return function, [*leaves, *inputs]


def _gpt2():
    from transformers import FlaxGPT2LMHeadModel, GPT2Config

    config = GPT2Config(n_layer=4, n_embd=768, n_head=12, n_positions=BATCH_SEQUENCE, vocab_size=8192)
    model = FlaxGPT2LMHeadModel(config, seed=0, _do_init=True)
    ids = (np.arange(BATCH_SEQUENCE, dtype=np.int32)[None, :] * 37) % config.vocab_size
    return _flat(lambda p, i: model(i, params=p).logits, model.params, ids)


def _bert():
    from transformers import BertConfig, FlaxBertModel

    config = BertConfig(num_hidden_layers=4, hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=8192)
    model = FlaxBertModel(config, seed=0)
    ids = (np.arange(BATCH_SEQUENCE, dtype=np.int32)[None, :] * 13) % config.vocab_size
    return _flat(lambda p, i: model(i, params=p).last_hidden_state, model.params, ids)


def _vit():
    from transformers import FlaxViTForImageClassification, ViTConfig

    config = ViTConfig(num_hidden_layers=4, hidden_size=384, num_attention_heads=6, intermediate_size=1536, image_size=224, patch_size=16)
    model = FlaxViTForImageClassification(config, seed=0)
    pixels = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return _flat(lambda p, x: model(x, params=p).logits, model.params, pixels)


def _resnet18():
    from transformers import FlaxResNetForImageClassification, ResNetConfig

    config = ResNetConfig(depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], layer_type="basic", embedding_size=64)
    model = FlaxResNetForImageClassification(config, seed=0)
    pixels = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return _flat(lambda p, x: model(x, params=p, train=False).logits, model.params, pixels)


def _wav2vec2():
    from transformers import FlaxWav2Vec2Model, Wav2Vec2Config

    config = Wav2Vec2Config(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024, do_stable_layer_norm=True, feat_extract_norm="layer")
    model = FlaxWav2Vec2Model(config, seed=0)
    audio = np.random.default_rng(3).standard_normal((1, 16000)).astype(np.float32)
    return _flat(lambda p, x: model(x, params=p).last_hidden_state, model.params, audio)


def _unet():
    import jax
    from diffusers import FlaxUNet2DConditionModel

    model = FlaxUNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(64, 128), layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=128, attention_head_dim=8,
    )  # fmt: skip
    rng = np.random.default_rng(4)
    sample = rng.standard_normal((1, 4, 32, 32)).astype(np.float32)
    timestep = np.array([10], dtype=np.int32)
    context = rng.standard_normal((1, 16, 128)).astype(np.float32)
    params = model.init_weights(jax.random.PRNGKey(0))
    return _flat(lambda p, s, t, c: model.apply({"params": p}, s, t, c).sample, params, sample, timestep, context)


def _bilstm():
    import flax.linen as nn
    import jax

    class BiLstm(nn.Module):
        @nn.compact
        def __call__(self, x):
            forward = nn.RNN(nn.OptimizedLSTMCell(128))
            backward = nn.RNN(nn.OptimizedLSTMCell(128))
            return nn.Dense(16)(nn.Bidirectional(forward, backward)(x))

    model = BiLstm()
    x = np.random.default_rng(5).standard_normal((8, 64, 64)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(0), x)
    return _flat(model.apply, params, x)


def _gru_scan():
    import equinox as eqx
    import jax

    cell = eqx.nn.GRUCell(64, 128, key=jax.random.PRNGKey(0))
    params, static = eqx.partition(cell, eqx.is_array)

    def run(p, xs):
        model = eqx.combine(p, static)

        def step(h, x):
            h = jax.vmap(model)(x, h)
            return h, h

        last, _ = jax.lax.scan(step, np.zeros((8, 128), np.float32), xs)
        return last

    xs = np.random.default_rng(6).standard_normal((128, 8, 64)).astype(np.float32)
    return _flat(run, params, xs)


def _equinox_mlp():
    import equinox as eqx
    import jax

    mlp = eqx.nn.MLP(784, 10, width_size=256, depth=2, key=jax.random.PRNGKey(0))  # 3 dots
    params, static = eqx.partition(mlp, eqx.is_array)

    def run(p, x):
        return jax.vmap(eqx.combine(p, static))(x)

    x = np.random.default_rng(7).standard_normal((32, 784)).astype(np.float32)
    return _flat(run, params, x)


MODELS = {
    m.name: m
    for m in (
        CorpusModel("gpt2", "transformers", "GPT-2 LM, 4 layers, d=768, T=128, vocab 8192", _gpt2),
        CorpusModel("bert", "transformers", "BERT encoder, 4 layers, d=768, T=128", _bert),
        CorpusModel("vit", "transformers", "ViT classifier, 4 layers, d=384, 224x224 image", _vit),
        CorpusModel("resnet18", "transformers", "ResNet-18 classifier, 224x224 image", _resnet18),
        CorpusModel("wav2vec2", "transformers", "wav2vec2 encoder, 2 layers, d=256, 1 s of 16 kHz audio", _wav2vec2),
        CorpusModel("unet", "diffusers", "UNet2DConditionModel, 2 levels (64, 128), 32x32x4 latent, cross-attention", _unet),
        CorpusModel("bilstm", "flax", "bidirectional LSTM (flax OptimizedLSTMCell 128), batch 8, T=64", _bilstm),
        CorpusModel("gru_scan", "equinox", "GRU cell 64->128 scanned over T=128, batch 8 (vmap)", _gru_scan),
        CorpusModel("equinox_mlp", "equinox", "MLP 784-256-256-10 (3 dots, ReLU), batch 32 (vmap)", _equinox_mlp),
    )
}


def _versions() -> dict[str, str]:
    names = ("jax", "jaxlib", "flax", "transformers", "diffusers", "equinox")
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def export(model: CorpusModel, out_dir: Path) -> None:
    """Writes the model's HLO text, inputs and description under out_dir/NAME (replacing an
    older export only once the new one is complete)."""
    import jax

    function, arrays = model.build()
    arrays = [np.asarray(a) for a in arrays]
    text = jax.jit(function, keep_unused=True).lower(*arrays).as_text(dialect="hlo")
    if "{...}" in text:
        raise RuntimeError(f"{model.name}: the HLO text elides a constant")
    target = out_dir / model.name
    staging = out_dir / f".{model.name}.partial"
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "module.hlo").write_text(text, encoding="utf-8")
    np.savez(staging / "inputs.npz", **{f"in{k}": a for k, a in enumerate(arrays)})
    meta = {
        "name": model.name,
        "library": model.library,
        "description": model.description,
        "versions": _versions(),
        "inputs": [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in arrays],
    }
    (staging / "model.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    if target.exists():
        for child in target.iterdir():
            child.unlink()
        target.rmdir()
    staging.rename(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS), metavar="NAME", help=f"default: all of {', '.join(MODELS)}")
    args = parser.parse_args(argv)
    for name in args.models:
        started = time.monotonic()
        print(f"exporting {name} ...", file=sys.stderr, flush=True)
        export(MODELS[name], args.out_dir)
        print(f"  {name}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
