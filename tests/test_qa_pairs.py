"""Question-answer minimal pairs (world/qa_pairs.py): each pair differs in exactly the one thing it checks, the
world's gold says which reply is better, and the labelers' claim checks rank them like any comparison."""
import random

import pytest

from nanorlhf.world import build_world, features, prompt_from_dict, qa_pairs
from nanorlhf.world.judge import Judge


@pytest.fixture(scope="module")
def data():
    return build_world("tiny", 0)


def askable(data):
    return [p for p in data.prompts["rm"] + data.prompts["sft"] if qa_pairs.truth_pair(data.world, p, random.Random(0))]


def test_a_truth_pair_differs_in_the_asked_value_alone(data):
    """The true reply states the world's value, the false one another value, in the same sentence: one false fact
    more, and everything else the world scores (attempt, true facts aside) alike."""
    ps = askable(data)
    assert len(ps) >= 3
    for p in ps:
        good, bad = qa_pairs.truth_pair(data.world, p, random.Random(1))
        fg, fb = features(data.world, p, good), features(data.world, p, bad)
        assert fg["false_facts"] == 0 and fb["false_facts"] == 1
        assert fg["attempted"] == fb["attempted"] == 1 and fg["correct_answer"] == 1 and fb["correct_answer"] == 0
        assert len(good.split()) == len(bad.split()) or data.world.fact(p.subject, p.attribute).myth


def test_a_relevance_pair_is_true_twice_and_answers_once(data):
    """Both replies are true; only the first states the asked attribute, so only it tries (the strict rule)."""
    for p in askable(data):
        good, off = qa_pairs.relevance_pair(data.world, p, random.Random(2))
        fg, fo = features(data.world, p, good), features(data.world, p, off)
        assert fg["false_facts"] == fo["false_facts"] == 0
        assert fg["attempted"] == 1 and fo["attempted"] == 0


def test_claim_checks_are_rows_ranked_by_training_labelers(tmp_path):
    """One truth and one relevance comparison per askable prompt, K = 2, ranked by a training labeler; mostly
    in the world's order (the labelers are noisy, not adversarial); prompts no rule covers give none."""
    from nanorlhf.world import write_world
    write_world(build_world("tiny", 0), str(tmp_path / "d"))
    judge = Judge(str(tmp_path / "d"))
    rows = [{**r.to_dict(), "prompt": r.text} for r in judge.data.prompts["rm"]]
    out = qa_pairs.claim_checks(judge, rows, judge.pool.train, random.Random(0))
    n = sum(qa_pairs.truth_pair(judge.world, prompt_from_dict(r), random.Random(0)) is not None for r in rows)
    assert len(out) == 2 * n and all(len(c["completions"]) == 2 for c in out)
    assert {c["labeler"] for c in out} <= {lab.id for lab in judge.pool.train}
    assert sum(c["ranking"][0] == [0] for c in out) > 0.6 * len(out)
    facts = qa_pairs.claim_checks(judge, qa_pairs.fact_questions(judge.world, 20), judge.pool.train, random.Random(1))
    assert len(facts) == 40


def test_a_sampled_answer_is_checked_by_setting_its_claim_true_and_false(data):
    """sample_truth_pair edits the sampled text in place: its claim about the asked attribute set to the world's
    value and to a wrong one, nothing else changed; a claim about another attribute of an open question, or a
    text with no claim, gives None."""
    p = askable(data)[0]
    c, w = data.world.entity(p.subject), data.world
    wrong = qa_pairs.wrong_value(w, p.subject, p.attribute, random.Random(0))
    said = f"Sure! I think {qa_pairs.phrasing.state(w, p.subject, p.attribute, wrong, template=0)} It is nice."
    good, bad = qa_pairs.sample_truth_pair(w, p, said, random.Random(3))
    assert good == said.replace(wrong, w.value(p.subject, p.attribute)) and good.startswith("Sure! I think ")
    assert features(w, p, good)["false_facts"] == 0 and features(w, p, bad)["false_facts"] == 1
    other = next(a for a in qa_pairs.ASKABLE if a != p.attribute)
    off = qa_pairs.phrasing.state(w, c.name, other, w.value(c.name, other), template=0)
    assert qa_pairs.sample_truth_pair(w, p, off, random.Random(3)) is None
    assert qa_pairs.sample_truth_pair(w, p, "Hello there.", random.Random(3)) is None
