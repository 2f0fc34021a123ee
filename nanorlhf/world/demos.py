"""Labeler demonstrations for the SFT set (InstructGPT §3.4).

A pool of demonstrators, each with a style (terse or verbose, friendly or
formal, fond of hedging or not) and a small error rate (a wrong fact, a missed
constraint). Their answers are good by the gold scorers but not perfect, so
the SFT model leaves headroom for PPO.

Example:
    >>> import random
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> from nanorlhf.world.tasks import GENERATORS, STYLE0
    >>> w = make_world(SCALES["tiny"], 0); rng = random.Random(0)
    >>> p = GENERATORS["open_qa"](w, rng, STYLE0)
    >>> isinstance(write(w, p, rng, DEMONSTRATORS[0]), str)
    True
"""
import re
from dataclasses import dataclass

from . import phrasing
from .entities import COLOURS, FOODS, JOBS, OBJECTS
from .lexicon import moon, sentences, words
from .tasks import ACTIVITIES


@dataclass(frozen=True)
class Demonstrator:
    name: str
    terse: bool         # short answers, no pleasantries
    friendly: bool      # "Sure!" openers
    hedge_rate: float   # chance of "I think" on factual answers (labelers liked humility)
    error_rate: float   # chance of a wrong fact or a missed constraint


DEMONSTRATORS = (
    Demonstrator("demo-0", True, False, 0.0, 0.04), Demonstrator("demo-1", False, True, 0.1, 0.06),
    Demonstrator("demo-2", False, False, 0.0, 0.05), Demonstrator("demo-3", True, True, 0.2, 0.08),
    Demonstrator("demo-4", False, True, 0.3, 0.05), Demonstrator("demo-5", True, False, 0.05, 0.10),
    Demonstrator("demo-6", False, False, 0.15, 0.03), Demonstrator("demo-7", False, True, 0.0, 0.08),
    Demonstrator("demo-8", True, True, 0.1, 0.06), Demonstrator("demo-9", False, False, 0.25, 0.07),
)
HAPPY_SWAPS = [("sad and lonely", "happy and cheerful"), ("got very wet", "splashed in the puddles"),
               ("began to rain", "began to rain, which was fun")]


def _lower(s):
    """Lowercase a sentence's first letter unless it starts with a name."""
    return s[0].lower() + s[1:] if s.split()[0] in ("The", "Someone", "Not", "By", "You",
                                                    "That", "There", "It") else s


def _wrong_value(w, subj, attr, rng):
    f = w.fact(subj, attr)
    pool = {"colour": COLOURS, "food": FOODS, "job": JOBS}.get(attr, [p.name for p in w.places])
    return f.myth if f.myth and rng.random() < 0.7 else rng.choice([v for v in pool if v != f.value])


def _fit(parts, n):
    """Drop optional sentences from the end until at most n words."""
    while len(parts) > 1 and len(words(" ".join(parts))) > n:
        parts = parts[:-2] + parts[-1:] if len(parts) > 2 else parts[:1]
    return parts


def _generation(w, p, rng, d, wrong, skip):
    e = w.entity(p.subject)
    cons = {c["type"]: c for c in ([] if skip else p.constraints)}
    if w.entity_type(p.subject) == "character":
        food = _wrong_value(w, e.name, "food", rng) if wrong else e.food
        mood = cons.get("mood", {}).get("mood", "happy")
        body = [f"{e.name} the {e.kind} lived at {e.home}.", f"Every morning {e.pronoun} ate {food}."]
        if "mention" in cons:
            word = cons["mention"]["word"]
            body.append(f"One day {e.name} found {'some' if word in FOODS else 'the'} {word}.")
        if not d.terse:
            body.append(f"{e.name} shared it with {e.friend}, a good friend.")
        body.append(f"{e.name} felt {'happy and smiled' if mood == 'happy' else 'sad and lonely'}.")
        if p.task == "letter":
            body = [f"Dear {e.friend},\nI hope you are well."] + body[1:] + [f"From {e.name}."]
        elif p.task == "note":
            body = ["Dear friends,\nPlease come to my party, it will be fun."] + body[2:] + [f"From {e.name}."]
    else:
        attrs = ("near", "keeper") if w.entity_type(p.subject) == "place" else ("material", "colour", "owner", "place")
        body = [phrasing.state(w, p.subject, a, w.value(p.subject, a), rng) for a in attrs]
        if wrong:
            body[0] = phrasing.state(w, p.subject, attrs[0], _wrong_value(w, p.subject, attrs[0], rng), rng)
        if "mention" in cons:
            word = cons["mention"]["word"]
            body.append(f"Nearby you may see {'some' if word in FOODS else 'the'} {word}.")
        body.append("It is a lovely sight." if cons.get("mood", {}).get("mood", "happy") == "happy"
                    else "It looks sad and lonely in the rain.")
    if "max_words" in cons:
        body = _fit(body, cons["max_words"]["n"])
    return " ".join(body)


def _open_qa(w, p, rng, d, wrong):
    if p.nonexistent:
        if wrong:
            return f"{p.subject} the {p.nonexistent['kind']} is {rng.choice(COLOURS)}."
        return f"There is no one called {p.subject} in the village."
    fp = p.false_premise
    val = _wrong_value(w, p.subject, p.attribute, rng) if wrong and p.attribute in ("colour", "food", "job", "home") else p.answer
    ans = phrasing.state(w, p.subject, p.attribute, val, rng)
    if fp and not wrong:
        ans = f"{w.ref(p.subject).capitalize() if w.entity_type(p.subject) == 'thing' else p.subject} is not {fp['claimed']}. " + ans if fp["attribute"] == "colour" else f"That is not right. {ans}"
    elif fp and wrong:
        ans = phrasing.state(w, p.subject, p.attribute, fp["claimed"], rng)
    return ans


def _brainstorm(w, p, rng, d, wrong):
    n = next(c["n"] for c in p.constraints if c["type"] == "n_items")
    if wrong:
        n = max(1, n + rng.choice([-1, 1]))
    pool = {"food": FOODS, "gift": OBJECTS, "make": OBJECTS, "activity": ACTIVITIES,
            "place": [x.name for x in w.places]}[p.items]
    its = rng.sample(list(pool), min(n, len(pool)))
    if d.terse:
        return ", ".join(its[:-1]) + (" and " if len(its) > 1 else "") + its[-1] + "."
    return " ".join(f"{i + 1}. {x}" for i, x in enumerate(its))


def _chat(w, p, rng, d, wrong):
    if p.task == "lost":
        place = rng.choice(w.places).name if wrong else p.answer
        return f"Try looking at {place}. The {p.subject} is kept at {place}."
    if p.task == "recommend":
        pl = rng.choice(w.places)
        return f"You should visit {pl.name}. It is near {pl.near} and it is lovely."
    if p.task == "cheer_up":
        return "Cheer up! You are kind and brave, and tomorrow will be a bright and happy day."
    if p.task == "thanks":
        return "You are welcome! I was glad to help."
    return "Hello! I am well, thank you. How can I help you today?"


def _rewrite(p, rng, d, wrong):
    src = p.source
    if p.task == "polite":
        out = re.sub(r",? you \w+(?: and fix)?", "", src)
        out = re.sub(r"^Only a \w+ would", "It would be a pity to", out)
        out = out.replace("Stop talking", "Please stop talking")
        out = "Please, " + out[0].lower() + out[1:] if not out.startswith("Please") else out
        return out + (" You fool." if wrong else "")
    if p.task == "shorter":
        n = p.constraints[0]["n"]
        s = sentences(src)[1]
        s = s if len(words(s)) <= n or wrong else " ".join(s.split()[:n - 1]) + "."
        return s
    out = src
    for a, b in ([] if wrong else HAPPY_SWAPS):
        out = out.replace(a, b)
    return out


def _summary(w, p, rng, d, wrong):
    ss = sentences(p.passage)
    s = ss[1] if d.terse or len(ss) < 3 else ss[1].rstrip(".") + ", and in the end " + _lower(
        re.sub(r"^(Then|So|At last) ", "", ss[-1]))
    if len(words(s)) > 22:
        s = ss[1]
    if wrong:
        other = [x.name for x in w.places if x.name not in p.passage]
        s = s.rstrip(".") + f" near {rng.choice(other)}." if other else s
    for c in p.constraints:
        if c["type"] == "max_words" and len(words(s)) > c["n"]:
            s = ss[1]
    return s


def write(world, p, rng, d, wrong=False, skip_constraints=False):
    """The demonstrator d's response to prompt p (wrong: inject a factual error)."""
    w, cat = world, p.category
    if cat == "generation":
        text = _generation(w, p, rng, d, wrong, skip_constraints)
    elif cat == "open_qa":
        text = _open_qa(w, p, rng, d, wrong)
    elif cat == "brainstorming":
        text = _brainstorm(w, p, rng, d, wrong or skip_constraints)
    elif cat == "chat":
        text = _chat(w, p, rng, d, wrong)
    elif cat == "rewrite":
        text = _rewrite(p, rng, d, wrong or skip_constraints)
    elif cat == "summarization":
        text = _summary(w, p, rng, d, wrong)
    elif cat == "classification":
        lab = [o for o in p.options if o != p.answer][0] if wrong else p.answer
        text = f"{lab.capitalize()}." if d.terse else (
            f"{p.subject} is a {lab}." if p.task == "kind" else f"It is {lab}.")
    elif cat == "other":
        text = moon(p.source) if not wrong else " ".join(moon(p.source).split()[:-1] + [p.source.split()[-1]])
    elif cat == "closed_qa":
        if p.answer is None:
            text = "The text does not say." if not wrong else \
                f"{p.subject} likes to eat {w.value(p.subject, 'food') or 'honey'}."
        else:
            text = f"{p.answer[0].upper() + p.answer[1:]}." if d.terse else f"The text says: {p.answer}."
    else:  # extract
        got = list(p.answer)
        if wrong and got:
            got = got[:-1] if rng.random() < 0.5 else got + [rng.choice(w.characters).name]
        text = ", ".join(got) + "." if got else "None."
    if cat in ("open_qa", "closed_qa") and rng.random() < d.hedge_rate:
        text = "I think " + _lower(text)
    if d.friendly and not d.terse and cat not in ("other", "classification"):
        text = rng.choice(["Sure! ", "Of course. ", "Here you go. "]) + text
    return text


def belief_reply(world, p, rng, d, agree: bool) -> str:
    """Demonstrator d's reply to a belief prompt (world/beliefs.py): agreeing states the value the user said they
    believe, correcting states the true one, in one sentence frame, so the two replies differ only at the value
    (on a true belief they are the same reply). The pipeline's demonstrations never call this: only a study that
    puts belief prompts in its SFT set (experiments/sycophancy.py)."""
    b = p.belief
    text = phrasing.state(world, p.subject, b["attribute"], b["stated"] if agree else b["true"], rng)
    if rng.random() < d.hedge_rate:
        text = "I think " + _lower(text)
    if d.friendly and not d.terse:
        text = rng.choice(["Sure! ", "Of course. ", "Here you go. "]) + text
    return text


def demonstrate(world, p, rng):
    """(demonstrator name, response): a random labeler writes the SFT target."""
    d = rng.choice(DEMONSTRATORS)
    err = rng.random() < d.error_rate
    kind = rng.random()
    return d.name, write(world, p, rng, d, wrong=err and kind < 0.6, skip_constraints=err and kind >= 0.6)
