"""Talk to the trained models: one prompt, a chat session, or several policies side by side.

    python sample.py --ckpt=out/small/ppo_1m/ckpt.pt --prompt="Tell me about Mira the crow."
    python sample.py --ckpt=out/small/sft_1m/ckpt.pt                  # interactive: one prompt a line
    python sample.py --compare=gpt,sft,ppo,ppo_ptx --prompt=test:0    # side by side, with scores

A chat policy (SFT, FLAN, PPO, PPO-ptx, DPO) answers in the chat format it was trained on,
`<|user|> prompt <|assistant|>`; a base model gets the raw text, as the ladder's "GPT" does.
Sampling uses the KV cache (--temperature, --top_k, --greedy, --seed); one policy's answer is
printed token by token. With --compare, each policy of a pipeline run (--run, --size; dpo: the
lineage's lowest beta) answers the same prompt, and each answer gets the reward model's score
and, when the world generated the prompt (`test:N` is the N-th test prompt; any prompt text
from the data folder is found too), its gold score (the held-out labelers' mean utility) and
one held-out labeler's 1-7 Likert. A free prompt has no gold. A prompt too long for the context
loses its start, with a note; a mistake (a test:N the data folder lacks, --max_new_tokens past
the context) is one line, and in a session the next line goes on.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field

from nanorlhf.chat import is_base
from nanorlhf.checkpoint import load_model, saved_path
from nanorlhf.generate import SamplingConfig
from nanorlhf.infra.cli import UsageError, run
from nanorlhf.infra.device import resolve_device
from nanorlhf.world.answers import answer, world_prompt, world_scores

KINDS = ("gpt", "flan", "sft", "ppo", "ppo_ptx", "dpo")


@dataclass
class Config:
    ckpt: str = ""
    """one policy's checkpoint to talk to"""
    compare: str = ""
    """or several policies of a pipeline run side by side: comma-separated among gpt, flan, sft, ppo, ppo_ptx, dpo"""
    prompt: str = ""
    """the prompt: text (a long one loses its start, with a note) or test:N, the N-th test prompt; empty: stdin"""
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
    out = {}
    for k in kinds:
        folder = f"{'base' if k == 'gpt' else k}_{cfg.size}"  # the base model's stage folder is base_<size>
        dpo = sorted(glob.glob(os.path.join(cfg.run, f"dpo_b*_{cfg.size}", "ckpt.pt")))  # the lineage's, per beta
        if k == "dpo" and dpo and not os.path.exists(os.path.join(cfg.run, folder)):
            folder = os.path.basename(os.path.dirname(dpo[0]))
        out[f"{k}_{cfg.size}" if k != "dpo" else folder] = os.path.join(cfg.run, folder, "ckpt.pt")
    return out


def check_room(name: str, model, max_new_tokens: int) -> None:
    """--max_new_tokens must leave room in the model's context for a prompt (<|user|>, a token, <|assistant|>)."""
    block = model.cfg.block_size
    if block - max_new_tokens < 3:
        raise UsageError(f"--max_new_tokens={max_new_tokens}: {name}'s context is {block} tokens, so at most "
                         f"{block - 3} new tokens leave room for a prompt")


def scores_text(a: dict) -> str:
    scores = [f"{k} {a[k]:+.2f}" for k in ("gold", "rm") if k in a] + ([f"Likert {a['likert']}/7"]
                                                                      if "likert" in a else [])
    return f"   ({', '.join(scores)})" if scores else ""


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def ask(models: dict, rm, judge, data_dir: str, prompt: str, cfg: Config) -> list[dict]:
    """Every policy's answer to one prompt, printed as it comes (one policy: token by token), with the RM's score
    and, for a world prompt, gold and Likert; a prompt too long for the context loses its start, with a note."""
    from nanorlhf.reward import score_texts
    row = world_prompt(data_dir, prompt) if judge is not None or prompt.startswith("test:") else None
    text = row["prompt"] if row is not None else prompt
    say(f"prompt: {text}" + ("" if row is not None else "   (a free prompt: no gold score)") + "\n")
    stream, out = len(models) == 1, []
    for name, (model, tok, base) in models.items():
        if stream:
            say(f"--- {name}\n")
        ans, dropped = answer(model, tok, text, base=base, hp=cfg.sampling, seed=cfg.seed,
                              on_text=say if stream else None)
        a = {"policy": name, "answer": ans, "dropped": dropped, "prompt": text, "world": row is not None}
        if rm is not None:
            a["rm"] = score_texts(rm[0], rm[1], [text], [ans], rm[3], rm[2]).item()
        if row is not None and judge is not None:
            a.update(world_scores(judge, row, ans, cfg.labeler_seed))
        say(("(empty)" * (not ans) + "\n" + scores_text(a).strip() + "\n" * bool(scores_text(a))) if stream else
            f"--- {name}{scores_text(a)}\n{ans or '(empty)'}\n")
        if dropped:
            say(f"note: the prompt's first {dropped} tokens were dropped so that it and --max_new_tokens="
                f"{cfg.sampling.max_new_tokens} fit {name}'s context of {model.cfg.block_size} tokens\n")
        out.append(a)
    return out


def main(cfg: Config) -> list[list[dict]]:
    import torch
    from nanorlhf.infra.cli import explain
    from nanorlhf.world.judge import Judge
    device = resolve_device(cfg.device)
    models, data_dir = {}, cfg.data_dir
    for name, path in policies(cfg).items():
        model, tok, ck = load_model(path, device, dropout=0.0)
        check_room(name, model, cfg.sampling.max_new_tokens)
        models[name] = (model.eval(), tok, is_base(ck))
        data_dir = data_dir or saved_path(ck, path, "data_dir")  # found again if the run folder moved
    rm_path = cfg.rm or (os.path.join(cfg.run, "rm", "ckpt.pt") if cfg.compare else "")
    rm = None
    if cfg.rm or (rm_path and os.path.exists(rm_path)):
        m, t, ck = load_model(rm_path, device, kind="scalar")
        rm = (m.eval(), t, ck["extra"]["bias"], device)
    judge = None
    if data_dir and os.path.exists(os.path.join(data_dir, "meta.json")):
        judge = Judge(data_dir, labeler_seed=cfg.labeler_seed)
    results = []
    with torch.no_grad():
        if cfg.prompt:  # one prompt: a mistake in it ends the run in one line (cli.run)
            return [ask(models, rm, judge, data_dir, cfg.prompt, cfg)]
        interactive = sys.stdin.isatty()
        if interactive:
            print("one prompt a line (each its own single-turn chat; test:N asks the N-th test prompt); Ctrl-D ends",
                  flush=True)
        for line in sys.stdin:
            if not line.strip():
                if interactive:
                    print("(an empty line: type a prompt, or Ctrl-D to end)", flush=True)
                continue
            try:
                results.append(ask(models, rm, judge, data_dir, line.rstrip("\n"), cfg))
            except Exception as e:  # a bad line is answered in one line and the session goes on
                reply = explain(e)
                if reply is None:
                    raise
                print(f"sample.py: {reply[0]}", file=sys.stderr, flush=True)
            cfg.seed += 1  # the next prompt of a session gets fresh noise, reproducibly
    return results


if __name__ == "__main__":
    run(main, Config, __doc__)
