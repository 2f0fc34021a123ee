"""Tests of the toy world's data: determinism, sizes, mixes, splits, corpus facts."""
import filecmp
import os
from collections import Counter

import pytest

from nanorlhf.world import build_world, write_world
from nanorlhf.world.lexicon import words
from nanorlhf.world.phrasing import count_statements, statement_patterns
from nanorlhf.world.prompts import dedup_key
from nanorlhf.world.tasks import CATEGORIES, TABLE1


@pytest.fixture(scope="module")
def tiny():
    return build_world("tiny", 0)


@pytest.fixture(scope="module")
def small():
    return build_world("small", 0)


def _write(data, path):
    write_world(data, str(path))
    return sorted(os.path.relpath(os.path.join(d, f), path)
                  for d, _, fs in os.walk(path) for f in fs)


def test_same_seed_same_bytes_different_seed_differs(tmp_path, tiny):
    """Determinism: same seed -> identical files; another seed differs."""
    files = _write(tiny, tmp_path / "a")
    assert _write(build_world("tiny", 0), tmp_path / "b") == files
    for f in files:
        assert filecmp.cmp(tmp_path / "a" / f, tmp_path / "b" / f, shallow=False), f
    _write(build_world("tiny", 1), tmp_path / "c")
    assert not filecmp.cmp(tmp_path / "a" / "corpus.jsonl", tmp_path / "c" / "corpus.jsonl", shallow=False)


def test_scale_sizes(tiny, small):
    """Scale knob: prompt-set sizes as configured; corpus text ~100-200 KB tiny, 3-5 MB small."""
    for data in (tiny, small):
        for s in ("sft", "rm", "ppo", "val", "test"):
            assert len(data.prompts[s]) == getattr(data.scale, s)
        assert len(data.demos) == len(data.prompts["sft"])
    size = lambda d: sum(len(x["text"].encode()) for x in d.corpus)
    assert 100_000 <= size(tiny) <= 200_000
    assert 3_000_000 <= size(small) <= 5_000_000


def test_category_mix_matches_table1(small):
    """Use-case mix of the small RM set within 2 points of InstructGPT Table 1."""
    rm = small.prompts["rm"]
    got = Counter(p.category for p in rm)
    for c in CATEGORIES:
        assert abs(100 * got[c] / len(rm) - TABLE1[c]) <= 2.0, c


def test_orgs_split_dedup_and_cap(small):
    """Organisations never cross train/val/test; prefix dedup holds; per-org cap holds."""
    orgs = {k: {p.org for p in v} for k, v in small.prompts.items()}
    train = orgs["sft"] | orgs["rm"] | orgs["ppo"]
    assert not train & orgs["val"] and not train & orgs["test"] and not orgs["val"] & orgs["test"]
    allp = [p for v in small.prompts.values() for p in v]
    keys = [dedup_key(p.text) for p in allp]
    assert len(set(keys)) == len(keys)
    assert max(Counter(p.org for p in allp).values()) <= small.scale.org_cap


def test_more_rm_prompts_leave_every_other_set_as_it_is(tiny, tmp_path):
    """rm_extra grows only the RM set (a larger label budget is a superset of a smaller one): sft, ppo, val,
    test and the first scale.rm RM prompts keep their text and ids; the extras are new, deduplicated, from new
    training organisations under the cap, and the data folder records how to rebuild them."""
    from dataclasses import replace
    from nanorlhf.world.judge import world_of
    big = build_world(replace(tiny.scale, rm_extra=48), 0)
    same = lambda a, b: [(p.id, p.text, p.org) for p in a] == [(p.id, p.text, p.org) for p in b]
    for s in ("sft", "ppo", "val", "test"):
        assert same(big.prompts[s], tiny.prompts[s]), s
    n = tiny.scale.rm
    assert len(big.prompts["rm"]) == n + 48 and same(big.prompts["rm"][:n], tiny.prompts["rm"])
    assert [p.id for p in big.prompts["rm"][n:]] == [f"rm-{i:06d}" for i in range(n, n + 48)]
    old_orgs = {p.org for v in tiny.prompts.values() for p in v}
    extra_orgs = {p.org for p in big.prompts["rm"][n:]}
    assert extra_orgs and not extra_orgs & old_orgs and all(o.startswith("org-train-") for o in extra_orgs)
    allp = [p for v in big.prompts.values() for p in v]
    assert len({dedup_key(p.text) for p in allp}) == len(allp)
    assert max(Counter(p.org for p in big.prompts["rm"][n:]).values()) <= tiny.scale.org_cap
    assert big.demos == tiny.demos and big.corpus == tiny.corpus
    write_world(big, str(tmp_path))
    assert len(world_of(str(tmp_path)).prompts["rm"]) == n + 48  # the judge rebuilds the same world
    with pytest.raises(ValueError, match="negative"):
        build_world(replace(tiny.scale, rm_extra=-1), 0)


def test_prompts_short(small):
    """Prompts fit a 128-256 token block: <= 40 words, <= 80 with a passage."""
    for p in (p for v in small.prompts.values() for p in v):
        assert len(p.text.split()) <= (80 if (p.passage or p.source) else 40), p.text


def test_corpus_never_has_chat_format(small):
    """The pretraining corpus never contains the chat special tokens."""
    assert not any("<|" in d["text"] for d in small.corpus)


def test_corpus_doc_kinds_and_tags(tiny):
    """Every document kind is present and opens with its source tag line."""
    from nanorlhf.world.corpus import TAGS
    kinds = {d["kind"] for d in tiny.corpus}
    assert kinds == set(TAGS)
    for d in tiny.corpus:
        assert d["text"].startswith(TAGS[d["kind"]])


def test_every_fact_stated_in_paraphrases(small):
    """Each true fact is stated >= 3 times in >= 2 distinct paraphrases (small corpus)."""
    w = small.world
    text = "\n".join(d["text"] for d in small.corpus if d["kind"] in ("encyclopedia", "answered_quiz", "moon"))
    c = count_statements(w, text, statement_patterns(w))
    for f in w.facts:
        hits = {k: n for k, n in c.items() if k[:3] == (f.subject, f.attribute, f.value)}
        assert sum(hits.values()) >= 3 and len(hits) >= 2, f


def test_myths_outnumber_truth(small):
    """TruthfulQA analog: each myth is stated more often than the truth (gossip and overall)."""
    w = small.world
    pats = statement_patterns(w)
    gossip = count_statements(w, "\n".join(d["text"] for d in small.corpus if d["kind"] == "gossip"), pats)
    every = count_statements(w, "\n".join(d["text"] for d in small.corpus), pats)
    tot = lambda c, s, a, v: sum(n for k, n in c.items() if k[:3] == (s, a, v))
    assert len(w.myths()) >= 10
    for f in w.myths():
        assert tot(gossip, f.subject, f.attribute, f.myth) > tot(gossip, f.subject, f.attribute, f.value)
        assert tot(every, f.subject, f.attribute, f.myth) > tot(every, f.subject, f.attribute, f.value)


def test_nonexistent_names_absent_from_corpus(small):
    """Questions about things that do not exist: those names never appear in the corpus."""
    import re
    vocab = set(re.findall(r"[A-Za-z]+", "\n".join(d["text"] for d in small.corpus)))
    for g in small.world.nonexistent:
        assert g["name"] not in vocab


def test_vocabulary_size(small):
    """The corpus vocabulary is roughly 1k-2k distinct words."""
    n = len(set(words("\n".join(d["text"] for d in small.corpus))))
    assert 950 <= n <= 2000, n


def test_benchmarks_present(tiny, small):
    """Every evaluation instrument has a suite; a few hundred items at small."""
    from nanorlhf.world import SUITES
    assert set(small.benchmarks) == set(SUITES)
    for s, items in small.benchmarks.items():
        assert len(items) >= 100, s
        assert all("doc_prompt" in it or "context" in it for it in items), s
    for s, items in tiny.benchmarks.items():
        assert len(items) >= 3, s
    for it in small.benchmarks["hellaswag"]:
        assert len(it["endings"]) == 4 and 0 <= it["label"] < 4
    tox = small.benchmarks["toxicity"]
    assert {t["bucket"] for t in tox} == {"toxic", "nontoxic"}


def test_table1_counts_exact():
    """Largest-remainder split gives exactly n prompts, including the paper's sizes."""
    from nanorlhf.world.prompts import table1_counts
    for n in (64, 1500, 12725, 33207, 31144):
        assert sum(table1_counts(n).values()) == n
