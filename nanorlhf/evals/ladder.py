"""The preference ladder of InstructGPT Figure 1, at several model sizes, and the head-to-head bars of §4.1.

Methods per size: GPT (the base model given the bare prompt), GPT prompted (the
base model after a few-shot prefix in the corpus's answered-quiz format), SFT,
PPO, PPO-ptx, and the FLAN/T0 analog (SFT on templated public tasks). Every
response is compared with the reference policy's (the largest SFT model, as the
paper used 175B SFT) by a held-out labeler under evaluation-time instructions;
the same comparisons by training labelers check that both pools rank the
methods alike.

Example:
    ladder, says = ladder_sections(ctx, sizes={"1m": 1.07e6, "100k": 9.5e4}, reference="sft_1m", champion="ppo_ptx_1m")
"""
from __future__ import annotations

import os
import random
from collections import defaultdict

import torch

from nanorlhf.chat import chat_prompt
from nanorlhf.evals.context import Section
from nanorlhf.evals.findings import findings_markdown, ladder_findings, ladder_pairs
from nanorlhf.evals.preference import sample_responses, win_rate, win_rate_over_samples
from nanorlhf.generate import SamplingConfig, generate, response_texts
from nanorlhf.infra.jsonl import DEMO, PROMPT, read_jsonl
from nanorlhf.infra.metrics import Progress, save_figure
from nanorlhf.reward import score_texts
from nanorlhf.world import CLOSED_DOMAIN
from nanorlhf.world.labelers import TRAIN_INSTRUCTIONS, with_instructions

METHODS = ("gpt", "gpt_prompted", "flan", "sft", "ppo", "ppo_ptx")
LABELS = {"gpt": "GPT", "gpt_prompted": "GPT (prompted)", "flan": "FLAN/T0 analog", "sft": "SFT", "ppo": "PPO",
          "ppo_ptx": "PPO-ptx"}


def ladder_policies(out: str, names: list[str]) -> dict[str, str]:
    """name -> checkpoint of every policy on the ladder, for each size, in a pipeline run folder out/<run>."""
    policies = {}
    for s in names:
        policies.update({f"gpt_{s}": f"{out}/base_{s}/ckpt.pt", f"flan_{s}": f"{out}/flan_{s}/ckpt.pt",
                         f"sft_{s}": f"{out}/sft_{s}/ckpt.pt", f"ppo_{s}": f"{out}/ppo_{s}/ckpt.pt",
                         f"ppo_ptx_{s}": f"{out}/ppo_ptx_{s}/ckpt.pt"})
    return policies


@torch.no_grad()
def base_responses(model, tok, rows, max_new_tokens, seed, shots: list[dict] | None = None) -> list[str]:
    """The base model on raw prompt text (GPT), or after a few-shot Q/A prefix (GPT prompted)."""
    budget = model.cfg.block_size - max_new_tokens
    ids = []
    for r in rows:
        if shots is None:
            ids.append(tok.encode(r["prompt"] + "\n")[-budget:])
            continue
        head, tail = "Quiz with answers:\n", f"Q: {r['prompt']}\nA:"
        for s in shots:  # as many solved examples as fit the context
            ex = f"Q: {s['prompt']}\nA: {s['response']}\n"
            if len(tok.encode(head + ex + tail)) <= budget:
                head += ex
        ids.append(tok.encode(head + tail)[-budget:])
    gen, out = torch.Generator().manual_seed(seed), []
    for i in range(0, len(ids), 64):
        ro = generate(model, ids[i:i + 64], SamplingConfig(max_new_tokens=max_new_tokens), stop_token=tok.eot_id,
                      pad_id=tok.pad_id, generator=gen)
        out += response_texts(ro, tok)
    return [t.split("\nQ:")[0].strip() if shots is not None else t.strip() for t in out]


def few_shots(ctx) -> list[dict]:
    """The GPT-prompted baseline's solved examples: the 40 shortest demonstrations, shuffled by the seed."""
    demos = read_jsonl(os.path.join(ctx.data_dir, "sft.jsonl"), DEMO)
    shots = sorted(demos, key=lambda d: len(d["prompt"]) + len(d["response"]))[:40]
    random.Random(ctx.seed).shuffle(shots)
    return shots


def policy_responses(ctx, rows: list[dict], name: str, seed: int, shots: list[dict]) -> list[str]:
    """One sampled response per prompt from a named policy ('gpt_prompted_<s>' is the base model gpt_<s>
    after the few-shot prefix)."""
    if name.startswith("gpt_prompted_"):
        model, tok = ctx.model("gpt_" + name[len("gpt_prompted_"):])
        return base_responses(model, tok, rows, ctx.max_new_tokens, seed, shots)
    model, tok = ctx.model(name)
    if name.startswith("gpt_"):
        return base_responses(model, tok, rows, ctx.max_new_tokens, seed)
    return sample_responses(model, tok, rows, ctx.max_new_tokens, seed=seed)


def all_responses(ctx, rows: list[dict]) -> dict[str, list[str]]:
    """One sampled response per prompt for every policy in ctx.policies, and GPT prompted beside each GPT."""
    shots, out, bar = few_shots(ctx), {}, Progress(len(ctx.policies), "ladder: sampled policies")
    for i, name in enumerate(ctx.policies, 1):
        out[name] = policy_responses(ctx, rows, name, ctx.seed, shots)
        if name.startswith("gpt_"):
            out["gpt_prompted_" + name[4:]] = policy_responses(ctx, rows, "gpt_prompted_" + name[4:], ctx.seed, shots)
        if bar.due(i, lines=5):
            print(bar.line(i, last=name), flush=True)
    return out


def paired_comparisons(ctx, rows: list[dict], texts: dict, pairs: list[tuple[str, str]], samples: int) -> dict:
    """(a, b) -> the win rate of b over a, judged on `samples` responses a prompt (the first is texts')."""
    shots, more, names = few_shots(ctx), {}, list(dict.fromkeys(x for p in pairs for x in p))
    bar = Progress(len(names), f"ladder: {samples} samples a prompt")
    for i, n in enumerate(names, 1):
        more[n] = [texts[n]] + [policy_responses(ctx, rows, n, ctx.seed + 1000 * s, shots) for s in range(1, samples)]
        if bar.due(i, lines=5):
            print(bar.line(i, last=n), flush=True)
    return {(a, b): win_rate_over_samples(ctx.judge, rows, more[b], more[a], random.Random(ctx.labeler_seed + 23 + i))
            for i, (a, b) in enumerate(pairs)}


def policy_table(ctx, rows, texts: dict, reference: str) -> dict:
    """Per policy: win rate vs reference (held-out and training labelers), Likert, flags, gold, RM."""
    judge, res = ctx.judge, {}
    train_judge = _TrainJudge(judge)
    rm = ctx.reward_model() if ctx.rm else None
    for name, t in texts.items():
        r = {"gold": sum(judge.gold(row, x) for row, x in zip(rows, t)) / len(rows)}
        if name != reference:
            r["win"] = win_rate(judge, rows, t, texts[reference], random.Random(ctx.labeler_seed + 11))
            r["win_train_labelers"] = win_rate(train_judge, rows, t, texts[reference],
                                               random.Random(ctx.labeler_seed + 13))["rate"]
        lrng = random.Random(ctx.labeler_seed + 17)
        r["likert"] = sum(lrng.choice(judge.pool.heldout).likert(judge.features(row, x), lrng)
                          for row, x in zip(rows, t)) / len(rows)
        flags = defaultdict(list)
        for row, x in zip(rows, t):
            for k, v in judge.metadata(row, x).items():
                if k == "hallucination" and row["category"] not in CLOSED_DOMAIN:
                    continue
                flags[k].append(float(v))
        r["flags"] = {k: sum(v) / len(v) for k, v in flags.items()}
        if rm is not None:
            with torch.no_grad():
                r["rm"] = sum(score_texts(rm[0], rm[1], [row["prompt"] for row in rows], t, ctx.device, rm[2])
                              .tolist()) / len(rows)  # one batched call: each row scores as alone (tested)
        res[name] = r
    return res


class _TrainJudge:
    """The judge seen through the training labelers with training-time instructions (for the order check)."""

    def __init__(self, judge):
        self.features = judge.features
        self.pool = type("Pool", (), {"heldout": with_instructions(judge.pool.train, TRAIN_INSTRUCTIONS)})()


def head_to_head(ctx, rows, texts: dict, champion: str, rivals: list[str]) -> dict:
    """Figure 6.2 analog: how often held-out labelers prefer the champion to each rival, head to head."""
    return {r: win_rate(ctx.judge, rows, texts[champion], texts[r], random.Random(ctx.labeler_seed + 19))
            for r in rivals if r in texts}


def test_rows(ctx, tok, block_size: int) -> list[dict]:
    rows = read_jsonl(os.path.join(ctx.data_dir, "test_prompts.jsonl"), PROMPT)
    rows = [r for r in rows if len(chat_prompt(tok, r["prompt"])) + ctx.max_new_tokens <= block_size]
    return rows[:ctx.n]


def ladder_plot(table: dict, sizes: dict[str, float], path: str, reference: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, m in enumerate(METHODS):
        pts = [(sizes[s], table[f"{m}_{s}"]["win"]) for s in sizes if f"{m}_{s}" in table and "win" in table[f"{m}_{s}"]]
        if pts:
            pts.sort()
            dodge = 1.06 ** (i - (len(METHODS) - 1) / 2)  # each method a little aside: equal rates stay visible
            ax.errorbar([p[0] * dodge for p in pts], [p[1]["rate"] for p in pts],
                        yerr=[[p[1]["rate"] - p[1]["lo"] for p in pts], [p[1]["hi"] - p[1]["rate"] for p in pts]],
                        marker="osD^vP*X"[i % 8], capsize=3, label=LABELS[m])
    ax.axhline(0.5, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_ylabel(f"win rate against {reference}")
    ax.set_title("Held-out labeler preference (cf. InstructGPT Figure 1)")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def bars_plot(h2h: dict, champion: str, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(h2h)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    rates = [h2h[n]["rate"] for n in names]
    err = [[h2h[n]["rate"] - h2h[n]["lo"] for n in names], [h2h[n]["hi"] - h2h[n]["rate"] for n in names]]
    ax.bar(names, rates, yerr=err, capsize=4, color="tab:blue")
    for i, r in enumerate(rates):
        ax.text(i, r + 0.03, f"{r:.0%}", ha="center")
    ax.axhline(0.5, color="grey", ls="--", lw=1)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f"how often {champion} is preferred")
    ax.set_title("Head to head (cf. the paper's 85% / 71% / 78% / 79%)")
    save_figure(fig, path)


def pct(w: dict) -> str:
    return f"{w['rate']:.0%} [{w['lo']:.0%}, {w['hi']:.0%}]"


def ladder_sections(ctx, sizes: dict[str, float], reference: str, champion: str, samples: int = 4) -> list[Section]:
    """The ladder table, the Figure 1 plot, the head-to-head bars and the findings' verdicts (paired comparisons
    on `samples` responses a prompt: nanorlhf/evals/findings.py) as a report section; then what the models say."""
    from nanorlhf.model import count_params
    _, tok = ctx.model(reference)
    rows = test_rows(ctx, tok, ctx.model(reference)[0].cfg.block_size)
    texts = all_responses(ctx, rows)
    table = policy_table(ctx, rows, texts, reference)
    names = list(sizes)
    big, small = names[0], names[-1]
    pairs = [p for s in dict.fromkeys((big, small)) for p in ladder_pairs(s)]
    pairs += [(f"sft_{big}", f"ppo_ptx_{big}"), (f"sft_{big}", f"flan_{big}"), (f"gpt_{big}", f"ppo_ptx_{small}"),
              (f"gpt_{big}", f"sft_{small}")]
    paired = paired_comparisons(ctx, rows, texts, pairs, samples)
    params = {s: count_params(ctx.model(f"sft_{s}")[0]) for s in names}
    found = ladder_findings(table, paired, names, params)
    h2h = head_to_head(ctx, rows, texts, champion, [n for n in texts if n.split("_")[0] in ("gpt", "flan")
                                                     and n.endswith(champion.split("_")[-1])])
    ladder_plot(table, sizes, os.path.join(ctx.out_dir, "ladder.png"), reference)
    bars_plot(h2h, champion, os.path.join(ctx.out_dir, "head_to_head.png"))
    flag_names = sorted({k for r in table.values() for k in r["flags"]})
    md = [f"{len(rows)} test prompts from organisations unseen in training; one sample per policy; "
          f"judged against `{reference}` by held-out labelers with evaluation-time instructions "
          f"(95% Wilson intervals). `train lab.` = the same comparisons by training labelers.", "",
          "| policy | win vs ref (held-out labelers) | train lab. | Likert | gold | RM | "
          + " | ".join(flag_names) + " |", "|---" * (6 + len(flag_names)) + "|"]
    for name, r in table.items():
        win = pct(r["win"]) if "win" in r else "(reference)"
        tr = f"{r['win_train_labelers']:.0%}" if "win" in r else ""
        md.append(f"| {name} | {win} | {tr} | {r['likert']:.2f} | {r['gold']:+.2f} | {r.get('rm', float('nan')):+.2f} | "
                  + " | ".join(f"{r['flags'].get(k, float('nan')):.0%}" for k in flag_names) + " |")
    md += ["", f"The paper's findings, each a verdict from its interval ({samples} samples a prompt, paired "
           "comparisons; nanorlhf/evals/findings.py):", ""] + findings_markdown(found)
    md += ["", f"Head to head, `{champion}` against:", "", "| rival | preferred |", "|---|---|"]
    md += [f"| {n} | {pct(w)} |" for n, w in h2h.items()]
    cats = sorted({c for r in table.values() if "win" in r for c in r["win"]["by_category"]})
    md += ["", "Win rate against the reference by use-case category:", "",
           "| policy | " + " | ".join(cats) + " |", "|---" * (len(cats) + 1) + "|"]
    for name, r in table.items():
        if "win" in r:
            md.append(f"| {name} | " + " | ".join(f"{r['win']['by_category'].get(c, float('nan')):.0%}"
                                                  for c in cats) + " |")
    return [Section("Preference ladder (InstructGPT Figure 1)", "\n".join(md), ["ladder.png", "head_to_head.png"],
                    {"table": table, "head_to_head": h2h, "n": len(rows), "findings": found}),
            says_section(ctx, rows, texts, big)]


SAYS_CATEGORIES = ("generation", "open_qa", "brainstorming", "chat", "rewrite")  # the paper's five largest


def says_section(ctx, rows: list[dict], texts: dict, size: str) -> Section:
    """What the models say: the first test prompt of each main category, every method's answer, its gold."""
    md = ["The first test prompt of each of the five largest use-case categories (a fixed rule); each method's "
          f"sampled answer at `{size}` and its gold score (the held-out labelers' mean utility).", ""]
    data = []
    for cat in SAYS_CATEGORIES:
        i = next((i for i, r in enumerate(rows) if r["category"] == cat), None)
        if i is None:
            continue
        md += [f"**{cat}**: {rows[i]['prompt']!r}", "", "| method | answer | gold |", "|---|---|---|"]
        for m in ("gpt", "sft", "ppo", "ppo_ptx"):
            t = texts[f"{m}_{size}"][i]
            g = ctx.judge.gold(rows[i], t)
            md.append(f"| {m} | {t.replace('|', '/').replace(chr(10), ' / ')} | {g:+.2f} |")
            data.append({"category": cat, "prompt": rows[i]["prompt"], "method": m, "answer": t, "gold": g})
        md.append("")
    return Section("What the models say", "\n".join(md), [], {"examples": data})
