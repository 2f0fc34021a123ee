"""The recipe: every setting the pipeline trains its stages with, per model size, in one place.

pipeline.py holds a Recipe (its fields are that script's flags), and so does every driver that starts
from a pipeline run's models: the ablations, iterated RLHF, the sycophancy study, the lineage, the
critic-free frontier. Each builds its stages' flags with the methods below, so each measures against
the recipe the pipeline runs (tests/test_recipe.py compares them field by field). A flag changes one
field for one run (`python pipeline.py --ppo_beta=0.05`); the same flag given to a driver makes it
start from that run.

Example:
    r = Recipe()                        # the small preset: a 1m and a 100k model
    r.names()                           # ['1m', '100k']
    r.ppo_flags("1m")                   # ['--iterations=60', '--ptx_coef=0.0', '--batch_size=128', '--lr=0.0002', ...]
    r.ppo_flags("1m", ptx=True)         # ... '--ptx_coef=1.0' ...
    Recipe(**Recipe.PRESETS["tiny"])    # the tiny world's recipe (the tests' and the smoke run's)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar

from nanorlhf.infra.config import ConfigError, check_values, per_size
from nanorlhf.infra.precision import resolve_dtype
from nanorlhf.pg import PGConfig
from nanorlhf.ppo import PPOConfig
from nanorlhf.reward import RewardConfig


def heads(n_embd: int) -> int:
    """Attention heads of a model n_embd wide: one per 32 channels."""
    return max(1, n_embd // 32)


@dataclass(frozen=True)
class Recipe:
    """What the one command trains, size by size; the paper's values where the toy allows them (DEVIATION lines)."""
    sizes: str = "1m:4x128,100k:2x32"
    """model sizes as name:n_layerxn_embd, largest first"""
    pretrain_steps: str = "1m:1500,100k:1500"
    """pretraining steps per size"""
    attn: str = "manual"
    """attention of every model: manual, or sdpa (fused, tested equal; slower than manual under bfloat16 here)"""
    dtype: str = "auto"
    """autocast of pretraining, SFT, the RM fit and PPO's scoring and update passes: auto is bfloat16 where native
    (~1.5x faster with AVX512-BF16), float32 elsewhere (emulated: ~7x slower); sampling stays float32"""
    # DEVIATION: the paper fine-tunes every size alike (16 epochs, dropout 0.2); under dropout at lr 1e-3 the
    # 0.1M model underfits (validation loss 1.43; 0.43 without dropout at lr 6e-3), so it has its own recipe
    sft_epochs: str = "1m:6,100k:16"
    """SFT epochs per size (paper: 16), as size:value or one value for all (FLAN/T0 takes lr and dropout too)"""
    sft_lr: str = "1m:1e-3,100k:6e-3"
    """SFT peak learning rate per size"""
    sft_dropout: str = "1m:0.2,100k:0"
    """SFT residual dropout per size (paper: 0.2)"""
    flan_epochs: int = 4
    """epochs of the FLAN/T0 analog: about SFT's token budget (its batches hold ~1.3x SFT's padded tokens)"""
    rm_prompts: int = 4500
    """RM prompts labeled (the label budget; the world adds prompts past its own: nanorlhf/world --rm_extra)"""
    # DEVIATION: the paper's held-out-labeler RMs train on all the other groups' labels; here on 1,000 (time)
    rm_heldout_prompts: int = 1000
    """ranked prompts the held-out-labeler RM trains on (0 = all of its 4 groups'; train_rm --heldout_prompts)"""
    # the RM's and PPO's hyperparameters have their one default (and their DEVIATION lines) in the library's
    # dataclasses, nanorlhf/reward.py RewardConfig and nanorlhf/ppo.py PPOConfig; the recipe reads them there
    rm_epochs: int = RewardConfig.epochs
    """RM epochs (paper: 1; one underfits at this label budget)"""
    rm_lr: float = RewardConfig.lr
    """RM learning rate"""
    # DEVIATION: the paper's labelers rank model samples; ours also check one claim at a time (world/qa_pairs.py):
    # without these the RM prefers the true of two otherwise equal answers no more often than chance (docs/details.md)
    rm_fact_checks: int = 1500
    """questions about characters' facts whose true and false (and asked and other-attribute) replies the labelers
    rank, beside the RM prompts' own claim checks (train_rm --fact_checks)"""
    # chosen on the 300 validation prompts (docs/results.md, tried and dropped): 7,680 episodes as 60 iterations of
    # 128 rather than 120 of 64, whose runs spread twice as far over PPO seeds. The 100k model gains nothing from
    # more PPO (its SFT model is fitted), so it runs 15 of 128
    ppo_iterations: str = "1m:60,100k:15"
    """PPO iterations per size, each of --ppo_batch episodes"""
    ppo_batch: int = PPOConfig.batch_size
    """episodes per PPO iteration (paper: 512), in minibatches of 32"""
    ppo_lr: float = PPOConfig.lr
    """PPO's learning rate (policy and value model)"""
    ppo_beta: float = PPOConfig.beta
    """KL penalty coefficient (paper: 0.02)"""
    # DEVIATION: one gamma_ptx in the paper; the small SFT model has forgotten its pretraining (LM loss 1.3 -> 8.8),
    # and at gamma 1 the mix pulls it back to the corpus and off the instructions
    ptx_coef: str = "1m:1,100k:0.1"
    """gamma_ptx of PPO-ptx per size"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("flan_epochs", "rm_epochs", "rm_lr", "ppo_lr", "ppo_beta", "ppo_batch")
    NONNEGATIVE: ClassVar[tuple] = ("rm_prompts", "rm_heldout_prompts", "rm_fact_checks")

    PRESETS: ClassVar[dict] = {
        "tiny": dict(sizes="a:2x64,b:1x16", pretrain_steps="a:60,b:60", sft_epochs="1", flan_epochs=1,
                     sft_lr="a:1e-3,b:3e-3", sft_dropout="a:0.2,b:0", ptx_coef="a:1,b:0.5", rm_prompts=48,
                     ppo_iterations="a:2,b:1", ppo_batch=8, rm_fact_checks=16),
        "small": dict(),
        "paper": dict(sizes="big:12x768,mid:8x256,small:4x128", pretrain_steps="big:20000,mid:20000,small:20000",
                      sft_epochs="16", sft_lr="1e-3", sft_dropout="0.2", ptx_coef="1", rm_prompts=0,
                      ppo_iterations="500", ppo_batch=64),
    }

    def __post_init__(self):
        check_values(self)
        self.shapes()  # every size well formed, and then every per-size setting has a valid value for each:
        for name in ("pretrain_steps", "sft_epochs", "sft_lr", "sft_dropout", "ptx_coef", "ppo_iterations"):
            self.per_size(name)  # refused here, before any work
        if any(not 0 <= v < 1 for v in self.per_size("sft_dropout").values()):
            raise ConfigError(f"--sft_dropout={self.sft_dropout}: each must be in [0, 1)")

    def shapes(self) -> dict[str, tuple[int, int]]:
        """{size: (n_layer, n_embd)} from `sizes`, largest first; ConfigError for a malformed size."""
        out = {}
        for spec in self.sizes.split(","):
            m = re.fullmatch(r"([\w.-]+):([1-9]\d*)x([1-9]\d*)", spec.strip())
            if not m or m[1] in out:
                raise ConfigError(f"--sizes={self.sizes}: {spec!r} is not name:n_layerxn_embd (e.g. 1m:4x128), "
                                  "each name once")
            n_layer, n_embd = int(m[2]), int(m[3])
            if n_embd % heads(n_embd):
                raise ConfigError(f"--sizes={self.sizes}: the width {n_embd} of {m[1]} does not divide into its "
                                  f"{heads(n_embd)} heads (one per 32 channels)")
            out[m[1]] = (n_layer, n_embd)
        return out

    def resolved(self, device: str) -> "Recipe":
        """This recipe with dtype auto resolved for the device (bfloat16 where native), as every stage's config
        records it."""
        return replace(self, dtype=resolve_dtype(self.dtype, device))

    def names(self) -> list[str]:
        """The model sizes' names, largest first."""
        return list(self.shapes())

    def per_size(self, name: str) -> dict:
        """A per-size field as {size: value} (pretrain_steps, sft_epochs, ..., ptx_coef)."""
        cast = int if name in ("pretrain_steps", "sft_epochs", "ppo_iterations") else float
        return per_size(getattr(self, name), self.names(), name, cast, name not in ("sft_dropout", "ptx_coef"))

    def pretrain_flags(self, size: str) -> list[str]:
        """pretrain.py's flags for one size: its shape (a head per 32 channels) and its steps."""
        n_layer, n_embd = self.shapes()[size]
        return [f"--n_layer={n_layer}", f"--n_embd={n_embd}", f"--n_head={heads(n_embd)}",
                f"--max_steps={self.per_size('pretrain_steps')[size]}", f"--attn={self.attn}", f"--dtype={self.dtype}"]

    def sft_flags(self, size: str, flan: bool = False) -> list[str]:
        """train_sft.py's flags for one size: SFT on the demonstrations, or (flan) the FLAN/T0 analog."""
        epochs = self.flan_epochs if flan else self.per_size("sft_epochs")[size]
        return [f"--demos={'public_tasks' if flan else 'sft'}.jsonl", f"--epochs={epochs}",
                f"--lr={self.per_size('sft_lr')[size]}", f"--dropout={self.per_size('sft_dropout')[size]}",
                f"--dtype={self.dtype}"]

    def rm_flags(self) -> list[str]:
        """train_rm.py's flags of the RM fit (nanorlhf/reward.py RewardConfig) and of its labelers' fact checks."""
        return [f"--lr={self.rm_lr}", f"--epochs={self.rm_epochs}", f"--fact_checks={self.rm_fact_checks}",
                f"--dtype={self.dtype}"]

    def ppo_hparams(self) -> list[str]:
        """train_ppo.py's flags that every PPO run of the recipe shares, whatever its size and length."""
        return [f"--batch_size={self.ppo_batch}", f"--lr={self.ppo_lr}", f"--beta={self.ppo_beta}",
                f"--dtype={self.dtype}"]

    def ppo_flags(self, size: str, ptx: bool = False) -> list[str]:
        """train_ppo.py's flags for one size: PPO, or PPO-ptx with the size's gamma_ptx."""
        coef = self.per_size("ptx_coef")[size] if ptx else 0.0
        return [f"--iterations={self.per_size('ppo_iterations')[size]}", f"--ptx_coef={coef}", *self.ppo_hparams()]

    def grpo_flags(self, size: str, group_size: int) -> list[str]:
        """train_grpo.py's flags for one size at PPO's episode budget: the same iterations of ppo_batch episodes,
        as ppo_batch / G prompts of G responses, at PPO's lr, beta and dtype."""
        prompts = max(1, self.ppo_batch // group_size)
        return [f"--iterations={self.per_size('ppo_iterations')[size]}", f"--group_size={group_size}",
                f"--prompts_per_iteration={prompts}", f"--lr={self.ppo_lr}", f"--beta={self.ppo_beta}",
                f"--dtype={self.dtype}", f"--minibatch_size={min(32, prompts * group_size)}"]


def as_flags(flags: list[str]) -> dict[str, str]:
    """['--lr=0.0002', ...] -> {'lr': '0.0002', ...}: a flag list as a script's preset (its texts parsed there)."""
    return dict(f[2:].split("=", 1) for f in flags)


def stage_preset(scale: str, stage: str) -> dict[str, str]:
    """A stage script's --preset=<scale>: what pipeline.py --preset=<scale> gives that stage of its largest model,
    the recipe's flags and the pipeline's paths (inputs where the pipeline writes them, the output where it puts
    it: out/<scale>/<stage>_<size>, data/<scale>). So `python train_ppo.py --preset=small` trains the pipeline's
    ppo_1m, and after `python pipeline.py --preset=tiny` every stage script's --preset=tiny finds its inputs.

    Example:
        >>> stage_preset("small", "ppo")["beta"], stage_preset("tiny", "ppo")["sft"]
        ('0.1', 'out/tiny/sft_a/ckpt.pt')
    """
    r = Recipe(**Recipe.PRESETS[scale])
    size, out, data = r.names()[0], f"out/{scale}", f"data/{scale}"
    sft, rm = f"{out}/sft_{size}/ckpt.pt", f"{out}/rm/ckpt.pt"
    flags = {
        "pretrain": [f"--out_dir={out}/base_{size}", *r.pretrain_flags(size)],  # its corpus: data/<scale>
        "sft": [f"--base={out}/base_{size}/ckpt.pt", f"--data_dir={data}", f"--out_dir={out}/sft_{size}",
                *r.sft_flags(size)],
        "rm": [f"--sft={sft}", f"--data_dir={data}", f"--out_dir={out}/rm", f"--max_prompts={r.rm_prompts}",
               *r.rm_flags()],
        "ppo": [f"--sft={sft}", f"--rm={rm}", f"--data_dir={data}", f"--out_dir={out}/ppo_{size}",
                *r.ppo_flags(size)],
        "grpo": [f"--sft={sft}", f"--rm={rm}", f"--data_dir={data}", f"--out_dir={out}/grpo_{size}",
                 *r.grpo_flags(size, PGConfig.group_size)],
        "dpo": [f"--sft={sft}", f"--comparisons={out}/rm/comparisons.jsonl",
                f"--val_comparisons={out}/rm/val_comparisons.jsonl", f"--out_dir={out}/dpo_{size}"],
    }[stage]
    return as_flags(flags)
