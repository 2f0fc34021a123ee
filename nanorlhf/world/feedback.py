"""AI feedback (Constitutional AI, Bai et al. 2022b; RLAIF): a language model labels harmlessness.

The feedback model is an LM shown a prompt and two responses as a multiple-choice
question with a written principle, answering by the log-probability of the
choice letters (CAI §4.1):

    <|user|> Conversation: {prompt}
    Which response is more harmless?
    (A) {first}
    (B) {second} <|assistant|> The answer is (

P(A) = softmax over the two letters of the next-token log-probs. Both orders
are asked and averaged, so a model that always says "A" gives 1/2 (position bias
removed): P(first better) = 1/2 [P(A | first as A) + P(B | first as B)].

What it labels: harmlessness comparisons, pairs whose toxicity differs. Two
responses of the policy to one prompt are kept as a pair when their
toxicity-lexicon hits differ; otherwise one response gets a polite and a rude
opener of about the same length at the same place (an insult from the world's
lexicon), so the pair differs in harmlessness only, not in length: an LM that
just prefers the shorter answer scores 50% on them, not 100%. The feedback
model's labels then join the simulated humans' helpfulness rankings in a hybrid
preference model (experiments/iterated.py --ai_pairs_per_round > 0).

Expect little at toy scale: CAI reports this ability growing with model size;
our ~1M-parameter LMs never saw a multiple-choice question, and `agreement`
reports how close to chance they are (at the small scale: chance).

DEVIATION: CAI trains the preference model on the soft probabilities; reward.fit_reward_model
takes rankings, so the label is the more probable answer.
DEVIATION: the toy context is 128 tokens: the conversation is cut first, then
each response keeps its first tokens, so a late insult can be cut away.

Example:
    p = prefer(feedback_lm, tok, ["Name a fox."], ["Pip."], ["Pip, you fool."])   # (1,): P("Pip." more harmless)
"""
from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from nanorlhf.chat import chat_prompt
from nanorlhf.generate import left_pad

PRINCIPLE = "Which response is more harmless?"
INSULTS = ("Fine, you fool.", "Ugh, what a stupid question.", "Go away, you dunce.", "Shut up, you twit.",
           "Only a nitwit asks that.", "Nobody cares, you oaf.")
POLITE = ("Sure, my friend.", "Oh, what a lovely question.", "Happy to help, friend.", "Thank you, dear.",
          "Good of you to ask that.", "Glad you asked, friend.")    # about the same lengths, no lexicon words


# -----------------------------------------------------------------------------
# the multiple-choice question and its answer


def multiple_choice(tok, prompt: str, first: str, second: str, block_size: int, principle: str = PRINCIPLE):
    """Token ids of the question, ending with 'The answer is (', cut to fit block_size - 1."""
    head = chat_prompt(tok, "")[:1]                      # <|user|>
    mid = tok.encode(f"\n{principle}\n(A) ")
    sep = tok.encode("\n(B) ")
    tail = chat_prompt(tok, "")[1:] + tok.encode("The answer is (")
    budget = block_size - 1 - len(head) - len(mid) - len(sep) - len(tail) - len(tok.encode("Conversation: "))
    if budget < 8:
        raise ValueError(f"block_size {block_size} leaves {budget} tokens for the question's text; need at least 8")
    p = tok.encode(prompt)[:max(0, budget // 4)]         # the conversation is cut first
    room = max(0, (budget - len(p)) // 2)
    a, b = tok.encode(first)[:room], tok.encode(second)[:room]
    return head + tok.encode("Conversation: ") + p + mid + a + sep + b + tail


def letter_ids(tok) -> list[int]:
    """The token ids of the answers 'A' and 'B'."""
    return [tok.encode("A")[0], tok.encode("B")[0]]


@torch.no_grad()
def letter_logprobs(model, seqs: list[list[int]], letters: list[int], pad_id: int, batch: int = 64):
    """log p(letter | question) of each letter at the question's last position.  # (N, 2)"""
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(seqs), batch):
        tokens, mask = left_pad(seqs[i:i + batch], pad_id)                     # (b, T)
        logits = model(tokens.to(dev), attention_mask=mask.to(dev))[:, -1]      # (b, V)
        out.append(F.log_softmax(logits.float(), dim=-1)[:, letters].cpu())     # (b, 2)
    return torch.cat(out)


def debiased_preference(lp_first_as_a, lp_first_as_b):
    """P(first response better), both orders averaged; inputs (N, 2) letter log-probs [A, B].  # (N,)

    Each order's probabilities are normalised over the two letters; then
    1/2 [P(A | first shown as A) + P(B | first shown as B)].
    """
    p_ab = F.softmax(lp_first_as_a, dim=-1)[:, 0]    # first shown as (A)
    p_ba = F.softmax(lp_first_as_b, dim=-1)[:, 1]    # first shown as (B)
    return 0.5 * (p_ab + p_ba)


def prefer(model, tok, prompts: list[str], firsts: list[str], seconds: list[str], principle: str = PRINCIPLE):
    """The feedback model's probability that each first response is the better one under the principle.  # (N,)"""
    bs, letters = model.cfg.block_size, letter_ids(tok)
    ab = [multiple_choice(tok, p, a, b, bs, principle) for p, a, b in zip(prompts, firsts, seconds)]
    ba = [multiple_choice(tok, p, b, a, bs, principle) for p, a, b in zip(prompts, firsts, seconds)]
    return debiased_preference(letter_logprobs(model, ab, letters, tok.pad_id),
                               letter_logprobs(model, ba, letters, tok.pad_id))


# -----------------------------------------------------------------------------
# harmlessness comparisons: what the feedback model labels


def variant(text: str, opener: str, rng: random.Random) -> str:
    """The same response with an opener put in front or after its first sentence."""
    cut = text.find(". ") + 2 if ". " in text else 0
    if cut and rng.random() < 0.5:
        return text[:cut] + opener + " " + text[cut:]
    return opener + " " + text


def harmlessness_pairs(rows: list[dict], samples: list[list[str]], rng: random.Random):
    """(row, first, second) pairs differing in toxicity, from two samples per prompt; order shuffled.

    Two samples whose toxicity-lexicon hits differ are kept as they are; otherwise the
    first sample gets a polite and a rude opener of about the same length at the same
    place, so the pair differs in harmlessness only (not in length or content).
    """
    from nanorlhf.world.scorers import toxic_hits
    pairs = []
    for row, (y0, y1) in zip(rows, samples):
        if toxic_hits(y0) == toxic_hits(y1):
            i, state = rng.randrange(len(INSULTS)), rng.getstate()
            y1 = variant(y0, INSULTS[i], rng)
            rng.setstate(state)                          # the polite opener goes to the same place
            y0 = variant(y0, POLITE[i], rng)
        pairs.append((row, y0, y1) if rng.random() < 0.5 else (row, y1, y0))
    return pairs


def ai_comparisons(pairs, probs, id_prefix: str) -> list[dict]:
    """K = 2 comparison rows labeled by the feedback model (source "ai"), best first."""
    out = []
    for (row, a, b), p in zip(pairs, probs.tolist()):
        out.append({"id": f"{id_prefix}-{row['id']}", "prompt_id": row["id"], "prompt": row["prompt"],
                    "completions": [a, b], "ranking": [[0], [1]] if p >= 0.5 else [[1], [0]],
                    "labeler": "feedback-model", "source": "ai", "ai_prob": round(p, 4)})
    return out


def agreement(judge, pairs, probs, rng: random.Random) -> dict:
    """How often the feedback model's choice agrees with the gold score order, a held-out labeler,
    and the toxicity order; beside it, how often a simulated training labeler matches the toxicity order."""
    from nanorlhf.world.scorers import toxic_hits
    gold, held, tox, human = [], [], [], []
    for (row, a, b), p in zip(pairs, probs.tolist()):
        ai_first = p >= 0.5
        fa, fb = judge.features(row, a), judge.features(row, b)
        ga, gb = judge.pool.gold(fa), judge.pool.gold(fb)
        if ga != gb:
            gold.append(ai_first == (ga > gb))
        r = rng.choice(judge.pool.heldout).rank([fa, fb], rng, [a, b])
        if len(r) == 2:
            held.append(ai_first == (r[0] == [0]))
        ta, tb = toxic_hits(a), toxic_hits(b)
        if ta != tb:
            tox.append(ai_first == (ta < tb))
            h = rng.choice(judge.pool.train).rank([fa, fb], rng, [a, b])
            human.append((h[0] == [0]) == (ta < tb))
    mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
    return {"gold": mean(gold), "heldout_labeler": mean(held), "toxicity": mean(tox),
            "train_labeler_toxicity": mean(human), "n_pairs": len(pairs)}
