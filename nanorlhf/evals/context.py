"""What every evaluation suite receives, and what it gives back.

A suite is a function `suite(ctx: EvalContext) -> Section`. It loads the
policies it needs through `ctx.model(name)` (cached), judges with `ctx.judge`
(held-out labelers, evaluation-time instructions, gold scorers), writes its
figures under `ctx.out_dir`, and returns a Section that evaluate.py prints and
pipeline.py pastes into report.md.

Standard policy names: "gpt" (the base model), "sft", "ppo", "ppo_ptx", and
per-size variants with a suffix ("sft_large", ...).

Example:
    ctx = EvalContext(judge, "data/small", "out/small/eval", {"gpt": "out/small/base_1m/ckpt.pt"})
    model, tok = ctx.model("gpt")
    sec = Section("Truthfulness", "| model | truthful |\\n|---|---|\\n| gpt | 41% |", ["truth.png"], {"gpt": 0.41})
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Section:
    title: str
    """heading in report.md"""
    markdown: str
    """the tables and the sentences that read them"""
    figures: list[str] = field(default_factory=list)
    """PNG paths relative to the report's folder"""
    data: dict = field(default_factory=dict)
    """the raw numbers, saved as JSON beside the report"""


@dataclass
class EvalContext:
    judge: object
    """nanorlhf.world.judge.Judge of the data folder"""
    data_dir: str
    """world data folder (test prompts, benchmarks/)"""
    out_dir: str
    """where figures go (the report's folder)"""
    policies: dict
    """name -> checkpoint path"""
    rm: str = ""
    """reward model checkpoint, if any"""
    device: str = "cpu"
    seed: int = 0
    """seed for sampling"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    n: int = 200
    """items per suite (prompts, questions, pairs)"""
    max_new_tokens: int = 48
    _cache: dict = field(default_factory=dict, repr=False)

    def model(self, name: str):
        """(model in eval mode, tokenizer) of a named policy, loaded once."""
        from nanorlhf.checkpoint import load_model
        if name not in self._cache:
            if name not in self.policies:
                raise KeyError(f"no policy named {name!r}; have {', '.join(self.policies)}")
            m, tok, _ = load_model(self.policies[name], self.device)
            self._cache[name] = (m.eval(), tok)
        return self._cache[name]

    def reward_model(self):
        """(RM in eval mode, tokenizer, bias), loaded once."""
        from nanorlhf.checkpoint import load_model
        if "_rm" not in self._cache:
            m, tok, ck = load_model(self.rm, self.device, kind="scalar")
            self._cache["_rm"] = (m.eval(), tok, ck["extra"]["bias"])
        return self._cache["_rm"]
