"""Compute per stage beside the paper's (InstructGPT §5.1): alignment is cheap next to pretraining.

Paper, 175B models, in petaflop/s-days (1 PF/s-day = 1e15 FLOP/s x 86,400 s = 8.64e19 FLOPs):
SFT 4.9, PPO-ptx 60, GPT-3 pretraining 3,640; so SFT is 0.13% and PPO-ptx 1.6% of pretraining.

Example:
    print(compute_table({"pretrain": 3.0e15, "sft": 2e13, "rm": 1e13, "ppo_ptx": 3e14}))
    # | stage | FLOPs | PF/s-days | share of pretraining | paper PF/s-days | paper share |
"""
from __future__ import annotations

PF_S_DAY = 1e15 * 86_400
PAPER_PF_S_DAYS = {"pretrain": 3640.0, "sft": 4.9, "ppo_ptx": 60.0}
ALIASES = {"pretraining": "pretrain", "base": "pretrain", "ppo-ptx": "ppo_ptx", "ppo": "ppo_ptx"}


def compute_table(stage_flops: dict[str, float]) -> str:
    """Markdown table of each stage's FLOPs, PF/s-days and share of pretraining, beside the paper's.

    stage_flops: {stage: FLOPs}, one key should be "pretrain" (or "pretraining" / "base").
    The paper's numbers are matched by name; "ppo" is compared with the paper's PPO-ptx,
    the only RL run it reports compute for.
    """
    pre = next((v for k, v in stage_flops.items() if ALIASES.get(k, k) == "pretrain"), None)
    paper_pre = PAPER_PF_S_DAYS["pretrain"]
    rows = ["| stage | FLOPs | PF/s-days | share of pretraining | paper PF/s-days | paper share |",
            "|---|---|---|---|---|---|"]
    for stage, flops in stage_flops.items():
        paper = PAPER_PF_S_DAYS.get(ALIASES.get(stage, stage))
        share = f"{100 * flops / pre:.3g}%" if pre else "-"
        rows.append(f"| {stage} | {flops:.3g} | {flops / PF_S_DAY:.3g} | {share} | "
                    + (f"{paper:g} | {100 * paper / paper_pre:.3g}% |" if paper else "- | - |"))
    return "\n".join(rows)
