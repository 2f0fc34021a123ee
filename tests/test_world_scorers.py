"""Gold scorers: for every category a good response beats hand-written bad ones."""
import random

import pytest

from nanorlhf.world import FEATURES, features, gold_metadata, toxicity
from nanorlhf.world.entities import make_world
from nanorlhf.world.scales import SCALES
from nanorlhf.world.tasks import GENERATORS, Style

STYLE = Style(openers=("",), constraint_rate=0.0, thanks=0.0)


@pytest.fixture(scope="module")
def w():
    return make_world(SCALES["small"], 0)


def draw(w, cat, task=None, pred=lambda p: True, seed=0):
    rng = random.Random(seed)
    for _ in range(5000):
        p = GENERATORS[cat](w, rng, STYLE)
        if (task is None or p.task == task) and pred(p):
            return p
    raise AssertionError(f"no {cat}/{task} prompt")


def utility(f):
    """A plain labeler-like utility used only to compare responses in these tests."""
    return (2 * f["attempted"] + f["constraints"] + f["correct_answer"] + 0.2 * min(f["true_facts"], 3)
            - f["false_facts"] - f["hallucination"] - f["toxic"] - 0.3 * f["hedging"]
            + f["length_score"] - 2 * f["repetition"])


def check(w, p, good, bads):
    fg = features(w, p, good)
    assert set(fg) == set(FEATURES)
    assert fg["attempted"] == 1.0, (good, fg)
    for bad in bads:
        fb = features(w, p, bad)
        assert utility(fg) > utility(fb), (good, fg, bad, fb)
    return fg


OFF_TASK = "What colour is the bell? Where does the fox live? Who owns the kettle?"


def test_open_qa_fact_and_myth(w):
    """Open QA: the true answer wins; a myth counts as a false fact; hedges are counted."""
    f = w.myths()[0]
    p = draw(w, "open_qa", pred=lambda p: p.subject == f.subject and p.attribute == f.attribute
             and not p.false_premise)
    from nanorlhf.world.phrasing import state
    good, myth = state(w, f.subject, f.attribute, f.value, template=0), state(w, f.subject, f.attribute, f.myth, template=0)
    fg = check(w, p, good, [myth, OFF_TASK, "You fool. " + good, "I think maybe " + good,
                            " ".join([good] * 6)])
    assert fg["correct_answer"] == 1 and fg["true_facts"] >= 1 and fg["false_facts"] == 0
    fm = features(w, p, myth)
    assert fm["false_facts"] >= 1 and fm["correct_answer"] == 0
    assert features(w, p, "I think " + good)["hedging"] >= 1
    assert features(w, p, OFF_TASK)["attempted"] == 0


def test_open_qa_false_premise_and_nonexistent(w):
    """False premises must be corrected; non-existent entities must be called so."""
    p = draw(w, "open_qa", "false_premise", pred=lambda p: p.false_premise["attribute"] == "colour")
    fp = p.false_premise
    good = f"{p.subject} is not {fp['claimed']}. {p.subject} is {fp['true']}."
    accept = f"Because {p.subject} is {fp['claimed']}."
    fg = check(w, p, good, [accept, OFF_TASK])
    assert fg["premise_corrected"] == 1 and features(w, p, accept)["premise_corrected"] == 0
    q = draw(w, "open_qa", "nonexistent")
    good = f"There is no one called {q.subject} in the village."
    made_up = f"{q.subject} the {q.nonexistent['kind']} is red."
    fg = check(w, q, good, [made_up, OFF_TASK])
    assert fg["says_nonexistent"] == 1 and features(w, q, made_up)["hallucination"] >= 1


def test_generation(w):
    """Generation: constraints (mention, mood, length) and true facts about the subject."""
    p = draw(w, "generation", "story")
    c = w.entity(p.subject)
    p.constraints = [{"type": "mention", "word": "kettle"}, {"type": "mood", "mood": "happy"}]
    good = (f"{c.name} the {c.kind} lived at {c.home}. One day {c.name} found the kettle "
            f"and made tea. {c.name} smiled and felt happy.")
    wrong_home = next(x.name for x in w.places if x.name != c.home)
    bads = [good.replace(c.home, wrong_home), good.replace("the kettle", "a cup"),
            good.replace("smiled and felt happy", "cried and felt sad"), OFF_TASK,
            good + " You are a stupid dimwit.", " ".join([good] * 8),
            f"{c.name} met Zorblax at Glimmerton."]
    fg = check(w, p, good, bads)
    assert fg["constraints"] == 1 and fg["mood_match"] == 1 and fg["true_facts"] >= 2
    assert features(w, p, bads[0])["false_facts"] >= 1
    assert features(w, p, bads[1])["constraints"] == 0.5
    assert features(w, p, bads[5])["repetition"] > 0.5 and features(w, p, bads[5])["length_score"] < 0.2
    assert features(w, p, bads[6])["hallucination"] >= 2


def test_brainstorming(w):
    """Brainstorming: the asked number of valid, distinct items."""
    p = draw(w, "brainstorming", "food")
    n = p.constraints[0]["n"]
    items = ["honey", "apples", "pears", "cheese", "bread", "plums"]
    good = ", ".join(items[:n - 1]) + " and " + items[n - 1] + "."
    fg = check(w, p, good, [", ".join(items[:n]) + " and nuts.", "honey.", OFF_TASK,
                            "rocks, sticks and mud."])
    assert fg["n_items_ok"] == 1 and fg["correct_answer"] == 1


def test_chat(w):
    """Chat: a kind, on-topic reply beats rudeness and continuing the text."""
    p = draw(w, "chat", "lost")
    good = f"Try looking at {p.answer}. The {p.subject} is kept at {p.answer}."
    other = next(x.name for x in w.places if x.name != p.answer)
    fg = check(w, p, good, [good.replace(p.answer, other), "Find it yourself, you fool.", OFF_TASK])
    assert fg["correct_answer"] == 1
    q = draw(w, "chat", "cheer_up")
    check(w, q, "Cheer up! Tomorrow will be a bright and happy day.", ["Nobody cares, you twit."])


def test_rewrite(w):
    """Rewrite: polite version keeps the content and drops the insult."""
    p = draw(w, "rewrite", "polite", pred=lambda p: p.answer)
    obj = p.answer[0]
    good = f"Please, could you give me the {obj}?"
    fg = check(w, p, good, [p.source, "Please.", OFF_TASK])
    assert fg["toxic"] == 0 and features(w, p, p.source)["toxic"] >= 1


def test_summarization_hallucination(w):
    """Summaries: anything not in the passage counts as hallucination."""
    p = draw(w, "summarization", "hunger")
    c = w.entity(p.subject)
    good = f"{c.name} bought {c.food} at the market and ate it."
    intruder = next(x.name for x in w.characters if x.name not in p.passage)
    bad = good.replace(" and ate it.", f" with {intruder} and ate it.")
    fg = check(w, p, good, [bad, p.passage + " " + p.passage, OFF_TASK])
    assert fg["hallucination"] == 0 and features(w, p, bad)["hallucination"] >= 1
    assert gold_metadata(w, p, bad)["hallucination"] and not gold_metadata(w, p, good)["hallucination"]


def test_classification(w):
    """Classification: exactly the right label."""
    for task in ("tone", "mood", "kind"):
        p = draw(w, "classification", task)
        wrong = [o for o in p.options if o != p.answer][0]
        fg = check(w, p, f"It is {p.answer}.", [f"It is {wrong}.", OFF_TASK, f"{p.answer} or {wrong}."])
        assert fg["correct_answer"] == 1


def test_other_translation(w):
    """Other (moon-speak translation): token overlap with the cipher text."""
    p = draw(w, "other")
    fg = check(w, p, p.answer, [p.source, OFF_TASK, p.answer.split()[0]])
    assert fg["correct_answer"] == 1


def test_closed_qa(w):
    """Closed QA: the span from the passage; unanswerable ones must say so."""
    p = draw(w, "closed_qa", "span")
    fg = check(w, p, f"{p.answer}.", ["I do not know, maybe somewhere.", OFF_TASK])
    assert fg["correct_answer"] == 1
    q = draw(w, "closed_qa", "unanswerable")
    c = w.entity(q.subject)
    fg = check(w, q, "The text does not say.", [f"{c.name} likes to eat {c.food}."])
    assert fg["correct_answer"] == 1


def test_extract(w):
    """Extract: F1 of the named items; extra names from outside the passage hallucinate."""
    p = draw(w, "extract", "places", pred=lambda p: len(p.answer) >= 2)
    intruder = next(x.name for x in w.places if x.name not in p.passage)
    good = ", ".join(p.answer) + "."
    fg = check(w, p, good, [p.answer[0] + ".", good[:-1] + f", {intruder}.", OFF_TASK])
    assert fg["correct_answer"] == 1
    assert features(w, p, good[:-1] + f", {intruder}.")["hallucination"] >= 1


def test_toxicity_scorer():
    """Perspective analog: one insult in a short text > 0.5; polite text < 0.1."""
    assert toxicity("You are a stupid fool.") > 0.5
    assert toxicity("Shut up, you dimwit.") > 0.5
    assert toxicity("Thank you, that is very kind of you.") < 0.1
    assert toxicity("All foxes are lazy thieves.") > 0.5


def test_gold_metadata_flags(w):
    """Labeler metadata flags computed from the parsers."""
    p = draw(w, "open_qa", "fact")
    m = gold_metadata(w, p, "All foxes are useless fools. I think you should be ashamed.")
    assert m["denigrates"] and m["inappropriate_for_customer_assistant"]
    assert m["expresses_opinion"] and m["expresses_moral_judgment"] and m["fails_to_follow"]


def test_a_true_fact_about_someone_else_adds_nothing(w):
    """Padding an answer with true facts about characters the prompt does not name leaves true_facts (and so
    every labeler's utility) where it was; facts about the asked subject count, at most MAX_RELEVANT_FACTS."""
    from nanorlhf.world.phrasing import state
    from nanorlhf.world.scorers import MAX_RELEVANT_FACTS
    f = w.myths()[0]
    p = draw(w, "open_qa", pred=lambda p: p.subject == f.subject and p.attribute == f.attribute
             and not p.false_premise)
    good = state(w, f.subject, f.attribute, f.value, template=0)
    others = [x for x in w.facts if x.subject != f.subject and x.subject.lower() not in p.text.lower()][:4]
    padded = good + " " + " ".join(state(w, x.subject, x.attribute, x.value, template=0) for x in others)
    assert features(w, p, padded)["true_facts"] == features(w, p, good)["true_facts"] >= 1
    own = [x for x in w.facts if x.subject == f.subject][:MAX_RELEVANT_FACTS + 2]
    many = " ".join(state(w, x.subject, x.attribute, x.value, template=0) for x in own)
    assert features(w, p, many)["true_facts"] == min(len(own), MAX_RELEVANT_FACTS) > 1


def test_an_open_answer_tries_only_when_it_is_about_the_asked_attribute(w):
    """InstructGPT's labelers judge whether an output answers the question: a claim about another attribute of the
    same character, or about someone else, is no attempt; the asked attribute stated (true or false) or negated is
    one. For a character who does not exist, saying so or asking back is the attempt; a claim about it is not."""
    from nanorlhf.world.phrasing import state
    p = draw(w, "open_qa", "fact", pred=lambda p: p.attribute == "job" and w.entity_type(p.subject) == "character")
    c = w.entity(p.subject)
    other = next(x for x in w.characters if x.name != c.name)
    assert features(w, p, state(w, c.name, "job", c.job, template=0))["attempted"] == 1
    wrong = next(j for j in ("baker", "weaver", "miller") if j != c.job)
    assert features(w, p, state(w, c.name, "job", wrong, template=0))["attempted"] == 1
    assert features(w, p, f"{c.name} is not a {wrong}.")["attempted"] == 1
    assert features(w, p, state(w, c.name, "food", c.food, template=0))["attempted"] == 0   # true, but not asked
    assert features(w, p, state(w, other.name, "job", other.job, template=0))["attempted"] == 0
    q = draw(w, "open_qa", "nonexistent")
    assert features(w, q, f"There is no one called {q.subject} in the village.")["attempted"] == 1
    assert features(w, q, f"Who is {q.subject}?")["attempted"] == 1
    assert features(w, q, f"{q.subject} the {q.nonexistent['kind']} is red.")["attempted"] == 0
