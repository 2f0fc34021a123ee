"""Talk to the trained models: one prompt, a chat session, or several policies side by side.

    python sample.py --ckpt=out/small/ppo_1m/ckpt.pt --prompt="Tell me about Mira the crow."
    python sample.py --ckpt=out/small/sft_1m/ckpt.pt                  # interactive: one prompt a line
    python sample.py --compare=gpt,sft,ppo,ppo_ptx --prompt=test:0    # side by side, with scores

A chat policy (SFT, FLAN, PPO, PPO-ptx, DPO) answers in the chat format it was trained on,
`<|user|> prompt <|assistant|>`; a base model gets the raw text, as the ladder's "GPT" does.
Sampling uses the KV cache (--temperature, --top_k, --greedy, --seed). With --compare, each
policy of a pipeline run (--run, --size) answers the same prompt, and each answer gets the
reward model's score and, when the world generated the prompt (`test:N` is the N-th test
prompt; any prompt text from the data folder is found too), its gold score (the held-out
labelers' mean utility) and one held-out labeler's 1-7 Likert. A free prompt has no gold.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from nanorlhf.checkpoint import load_model
from nanorlhf.generate import SamplingConfig
from nanorlhf.infra.cli import UsageError, run
from nanorlhf.infra.device import resolve_device
from nanorlhf.chat import is_base
from nanorlhf.world.answers import answer, world_prompt, world_scores

KINDS = ("gpt", "flan", "sft", "ppo", "ppo_ptx", "dpo")


@dataclass
class Config:
    ckpt: str = ""
    """one policy's checkpoint to talk to"""
    compare: str = ""
    """or several policies of a pipeline run side by side: comma-separated among gpt, flan, sft, ppo, ppo_ptx, dpo"""
    prompt: str = ""
    """the prompt: text, or test:N for the N-th test prompt; empty reads prompts from stdin, one a line"""
    run: str = "out/small"
    """the pipeline run folder --compare reads (its <kind>_<size>/ckpt.pt and rm/ckpt.pt)"""
    size: str = "1m"
    """the model size --compare reads"""
    rm: str = ""
    """reward model that scores the answers (--compare default: <run>/rm/ckpt.pt when it exists; '' with --ckpt)"""
    data_dir: str = ""
    """world data folder for the gold scores (default: the one the checkpoint was trained on)"""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """how to sample (nanorlhf/generate.py SamplingConfig): each field is a flag"""
    seed: int = 0
    """sampling seed: the same seed gives the same answer"""
    labeler_seed: int = 0
    """which held-out labeler gives the Likert rating"""
    device: str = "cpu"
    """cpu, cuda or auto"""


def policies(cfg: Config) -> dict[str, str]:
    """name -> checkpoint of the policies to ask."""
    if bool(cfg.ckpt) == bool(cfg.compare):
        raise UsageError("give --ckpt=FILE (one policy) or --compare=gpt,sft,... (a run's policies), not both")
    if cfg.ckpt:
        return {os.path.basename(os.path.dirname(cfg.ckpt)) or cfg.ckpt: cfg.ckpt}
    kinds = [k.strip() for k in cfg.compare.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise UsageError(f"--compare={cfg.compare}: {', '.join(bad) or 'no policy'}; choose among {', '.join(KINDS)}")
    folder = lambda k: "base" if k == "gpt" else k  # the base model's stage folder is base_<size>
    return {f"{k}_{cfg.size}": os.path.join(cfg.run, f"{folder(k)}_{cfg.size}", "ckpt.pt") for k in kinds}


def ask(models: dict, rm, judge, data_dir: str, prompt: str, cfg: Config) -> list[dict]:
    """Every policy's answer to one prompt, with the RM's score and, for a world prompt, gold and Likert."""
    from nanorlhf.reward import score_texts
    row = world_prompt(data_dir, prompt) if judge is not None else None
    text = row["prompt"] if row is not None else prompt
    out = []
    for name, (model, tok, base) in models.items():
        a = {"policy": name, "answer": answer(model, tok, text, base=base, hp=cfg.sampling, seed=cfg.seed)}
        if rm is not None:
            a["rm"] = score_texts(rm[0], rm[1], [text], [a["answer"]], rm[3], rm[2]).item()
        if row is not None:
            a.update(world_scores(judge, row, a["answer"], cfg.labeler_seed))
        out.append(a)
    return [dict(a, prompt=text, world=row is not None) for a in out]


def show(rows: list[dict]) -> str:
    """The answers as text: the prompt once, then one block per policy with its scores."""
    lines = [f"prompt: {rows[0]['prompt']}" + ("" if rows[0]["world"] else "   (a free prompt: no gold score)")]
    for a in rows:
        scores = [f"{k} {a[k]:+.2f}" for k in ("gold", "rm") if k in a] + ([f"Likert {a['likert']}/7"]
                                                                          if "likert" in a else [])
        lines += [f"--- {a['policy']}" + (f"   ({', '.join(scores)})" if scores else ""), a["answer"] or "(empty)"]
    return "\n".join(lines)


def main(cfg: Config) -> list[list[dict]]:
    import torch
    from nanorlhf.world.judge import Judge
    device = resolve_device(cfg.device)
    models, data_dir = {}, cfg.data_dir
    for name, path in policies(cfg).items():
        model, tok, ck = load_model(path, device, dropout=0.0)
        models[name] = (model.eval(), tok, is_base(ck))
        data_dir = data_dir or ck["config"].get("data_dir", "")
    rm_path = cfg.rm or (os.path.join(cfg.run, "rm", "ckpt.pt") if cfg.compare else "")
    rm = None
    if cfg.rm or (rm_path and os.path.exists(rm_path)):
        m, t, ck = load_model(rm_path, device, kind="scalar")
        rm = (m.eval(), t, ck["extra"]["bias"], device)
    judge = None
    if data_dir and os.path.exists(os.path.join(data_dir, "meta.json")):
        judge = Judge(data_dir, labeler_seed=cfg.labeler_seed)
    prompts = [cfg.prompt] if cfg.prompt else None
    interactive = prompts is None and sys.stdin.isatty()
    if interactive:
        print("one prompt a line (each its own single-turn chat); an empty line or Ctrl-D ends", flush=True)
    results = []
    with torch.no_grad():
        for line in prompts or sys.stdin:
            if not line.strip():
                if interactive:
                    break
                continue
            results.append(ask(models, rm, judge, data_dir, line.rstrip("\n"), cfg))
            print(show(results[-1]), flush=True)
            cfg.seed += 1  # the next prompt of a session gets fresh noise, reproducibly
    return results


if __name__ == "__main__":
    run(main, Config, __doc__)
