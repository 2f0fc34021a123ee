"""Answer-matching metrics of the public benchmarks: SQuAD exact match and F1, BLEU.

SQuAD's official script normalises both strings before comparing: lowercase,
drop punctuation, drop the articles a / an / the, collapse whitespace. F1 is
over the bags of normalised words. BLEU (Papineni et al. 2002) is the geometric
mean of clipped n-gram precisions (n = 1..4) times a brevity penalty
exp(1 - r/c) when the candidate is shorter than the reference; counts are
pooled over the corpus before dividing (corpus BLEU, as WMT reports it).

Example:
    normalize_answer("The  Bramble Hill!")       # 'bramble hill'
    exact_match("the Fern Brook.", "Fern Brook") # 1.0
    f1_score("at Fern Brook", "Fern Bridge")     # 0.4
    bleu(["the cat sat on the mat"], ["the cat sat on the mat"])   # 1.0
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase, no punctuation, no articles, single spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    """Harmonic mean of word precision and recall after normalisation (SQuAD's F1)."""
    p, t = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not p or not t:
        return float(p == t)
    common = sum((Counter(p) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def _tokens(s: str) -> list[str]:
    """'Pip vji guy.' -> ['pip', 'vji', 'guy', '.']: punctuation is its own token, as in sacreBLEU."""
    return re.findall(r"[\w']+|[^\w\s]", s.lower())


def _ngrams(ws: list[str], n: int) -> Counter:
    return Counter(tuple(ws[i:i + n]) for i in range(len(ws) - n + 1))


def bleu(candidates: list[str], references: list[str], max_n: int = 4) -> float:
    """Corpus BLEU in [0, 1] with one reference per candidate; lowercased words and punctuation marks.

    An n-gram order with no match anywhere makes BLEU 0 (no smoothing), as in the
    original definition; with 300 sentences that only happens to very bad output.
    """
    match, total = [0] * max_n, [0] * max_n
    c_len = r_len = 0
    for cand, ref in zip(candidates, references):
        c, r = _tokens(cand), _tokens(ref)
        c_len, r_len = c_len + len(c), r_len + len(r)
        for n in range(1, max_n + 1):
            cn, rn = _ngrams(c, n), _ngrams(r, n)
            match[n - 1] += sum((cn & rn).values())
            total[n - 1] += max(0, len(c) - n + 1)
    if c_len == 0 or min(match) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / max_n
    bp = 1.0 if c_len > r_len else math.exp(1 - r_len / c_len)
    return bp * math.exp(log_p)
