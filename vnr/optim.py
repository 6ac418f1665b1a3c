"""The optimizer and learning-rate schedule of every run, from the config's top-level keys
(`optimizer`, `lr`, `schedule`, `warmup_steps`, `end_lr_factor`, `total_steps`, `b1`, `b2`,
`eps`, `weight_decay`, `momentum`, `grad_clip`; defaults in `configs/common.py`). Papers'
presets set them (MoviePuzzle Table 7, Sc2St Appendix A.1, M-SYMON §6.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import optax

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("warmup_cosine", "cosine", "constant", "step_decay", "inverse_sqrt")


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """`config.optimizer` on the `config.schedule` learning rate, after global-norm clipping
    at `grad_clip` (0: none): "adamw" (`b1`, `b2`, `eps`, decoupled `weight_decay`), "adam"
    (no weight decay) or "sgd" (`momentum`, default 0.9; `weight_decay` added to the gradient
    as L2, as torch.optim.SGD does)."""
    name = config.get("optimizer", "adamw")
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer={name!r}: use one of {OPTIMIZERS}")
    eps = config.get("eps", 1e-8)
    if name == "adam":
        opt = optax.adam(make_lr(config), b1=config.b1, b2=config.b2, eps=eps)
    elif name == "sgd":
        opt = optax.chain(optax.add_decayed_weights(config.weight_decay),
                          optax.sgd(make_lr(config), momentum=config.get("momentum", 0.9)))
    else:
        opt = optax.adamw(make_lr(config), b1=config.b1, b2=config.b2, eps=eps,
                          weight_decay=config.weight_decay)
    if config.grad_clip < 0:
        raise ValueError(f"grad_clip={config.grad_clip}: use a positive norm, or 0 for none")
    return optax.chain(optax.clip_by_global_norm(config.grad_clip), opt) if config.grad_clip \
        else opt


def make_lr(config: ml_collections.ConfigDict) -> optax.Schedule:
    """`config.schedule`: "warmup_cosine" (linear warmup over `warmup_steps` to `lr`, cosine
    decay to `lr * end_lr_factor` at `total_steps`), "cosine" (the same with no warmup),
    "constant" (`lr` throughout; `warmup_steps` must be 0), "step_decay" (`lr` times
    `lr_decay` after every `decay_steps` steps, e.g. MoEE's 0.95 per epoch; no warmup) or
    "inverse_sqrt" (fairseq's: linear warmup from `warmup_init_lr` to `lr` over
    `warmup_steps`, then `lr * sqrt(warmup_steps / step)`, e.g. upstream RNL's)."""
    kind = config.get("schedule", "warmup_cosine")
    end = config.lr * config.get("end_lr_factor", 0.01)
    if kind == "constant":
        if config.warmup_steps:
            raise ValueError(f"schedule='constant' has no warmup: set warmup_steps=0 "
                             f"(it is {config.warmup_steps})")
        return optax.constant_schedule(config.lr)
    if kind == "step_decay":
        decay, every = config.get("lr_decay", 1.0), config.get("decay_steps", 0)
        if config.warmup_steps or every < 1 or not 0 < decay <= 1:
            raise ValueError(f"schedule='step_decay' needs decay_steps >= 1 (it is {every}), "
                             f"0 < lr_decay <= 1 (it is {decay}) and warmup_steps=0 (it is "
                             f"{config.warmup_steps})")
        return optax.exponential_decay(config.lr, every, decay, staircase=True)
    if kind == "inverse_sqrt":
        return _inverse_sqrt(config.lr, config.get("warmup_init_lr", 0.0), config.warmup_steps)
    if kind == "cosine":
        return optax.cosine_decay_schedule(config.lr, max(config.total_steps, 1),
                                           alpha=end / config.lr if config.lr else 0.0)
    if kind != "warmup_cosine":
        raise ValueError(f"schedule={kind!r}: use one of {SCHEDULES}")
    return optax.warmup_cosine_decay_schedule(
        0.0, config.lr, config.warmup_steps, max(config.total_steps, config.warmup_steps + 1),
        end_value=end)


def _inverse_sqrt(lr: float, init: float, warmup: int) -> optax.Schedule:
    if warmup < 1 or not 0 <= init <= lr:
        raise ValueError(f"schedule='inverse_sqrt' needs warmup_steps >= 1 (it is {warmup}) and "
                         f"0 <= warmup_init_lr <= lr (it is {init}, lr {lr})")

    def schedule(step: jax.Array) -> jax.Array:
        t = jnp.asarray(step, jnp.float32)
        warm = init + (lr - init) * t / warmup
        return jnp.where(t < warmup, warm, lr * jnp.sqrt(warmup / jnp.maximum(t, 1.0)))

    return schedule
