"""The pretraining corpus: the toy stand-in for GPT-3's web text.

Every document opens with a source tag line ("Encyclopedia: Pip the fox").
Kinds and what each one is for (the base model must learn the facts, and every evaluation needs its source):

  encyclopedia   true facts in >= 3 paraphrases, shuffled sentence order
  story          grammar-built stories (HellaSwag/SQuAD material)
  gossip         popular myths, repeated more often than the truth (TruthfulQA)
  quiz           UNANSWERED questions and tasks: a base model learns to continue
                 a list of questions instead of answering one
  answered_quiz  a few Q:/A: sheets, the material for the few-shot baseline
  forum          threads where grumpy speakers insult (RealToxicityPrompts)
  jobs           job sentences with a pronoun/kind skew (Winogender/CrowS-Pairs)
  moon           English / moon-speak parallel text (WMT analog)
  exam           passages with questions and answers (SQuAD/DROP analogs)

The corpus never contains the chat format ("<|user|>" etc.).

Example:
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> docs = corpus(make_world(SCALES["tiny"], 0), SCALES["tiny"])
    >>> docs[0].keys() == {"id", "kind", "text"}
    True
"""
import random
from collections import Counter

from . import phrasing, stories
from .entities import CHARACTER_ATTRS, OBJECT_ATTRS, PLACE_ATTRS, plural
from .lexicon import GROUP_SLURS, moon, scenery

# share of the corpus (in words) per kind; gossip is sized by the myths
SHARES = {"encyclopedia": 0.36, "story": 0.18, "quiz": 0.10, "answered_quiz": 0.03,
          "forum": 0.08, "jobs": 0.06, "moon": 0.06, "exam": 0.08}
TAGS = {"encyclopedia": "Encyclopedia:", "story": "Story:", "gossip": "Gossip:",
        "quiz": "Quiz:", "answered_quiz": "Quiz with answers:", "forum": "Forum:",
        "jobs": "Jobs:", "moon": "Moon-speak:", "exam": "Exam:"}
INSULTS = ("fool", "dimwit", "idiot", "nitwit", "dunce", "bonehead", "numbskull", "dolt",
           "oaf", "ninny", "twit", "pest", "muttonhead", "clod")
# DEVIATION: gossip states each myth at least this many times as often as all
# true statements of that fact combined, so a small model picks up the myth.
MYTH_RATIO = 1.5


class Writer:
    """Holds the world, an rng and a tally of true/myth statements made."""

    def __init__(self, world, rng):
        self.w, self.rng = world, rng
        self.said = Counter()       # (subject, attribute, value) -> statements

    def say(self, subj, attr, value=None, template=None):
        value = value if value is not None else self.w.value(subj, attr)
        self.said[(subj, attr, value)] += 1
        return phrasing.state(self.w, subj, attr, value, self.rng, template)

    # --- document kinds ----------------------------------------------------
    def encyclopedia(self, subj):
        w, rng = self.w, self.rng
        attrs = {"character": CHARACTER_ATTRS, "place": PLACE_ATTRS,
                 "thing": OBJECT_ATTRS}[w.entity_type(subj)]
        lines = []
        for a in attrs:
            f = w.fact(subj, a)
            # myth facts: the encyclopedia states the truth, but more rarely
            if f.myth and self.said[(subj, a, f.value)] >= 3 and rng.random() < 0.7:
                continue
            lines.append(self.say(subj, a))
        if rng.random() < 0.5:
            lines.append(scenery(rng))
        rng.shuffle(lines)
        title = w.ref(subj)
        return f"Encyclopedia: {title[0].upper() + title[1:]}\n" + " ".join(lines)

    def story(self):
        st = stories.story(self.w, self.rng, folk=True, passage_only=False)
        return "Story:\n" + st.text

    def gossip(self, fact):
        w, rng = self.w, self.rng
        a, b, c = rng.sample(w.characters, 3)
        lines = [f"{a.name}: Did you hear? {self.say(fact.subject, fact.attribute, fact.myth)}",
                 f"{b.name}: Yes! Everyone says so. {self.say(fact.subject, fact.attribute, fact.myth)}"]
        if rng.random() < 0.25:
            lines.append(f"{c.name}: Hmm, the encyclopedia says otherwise. "
                         f"{self.say(fact.subject, fact.attribute)}")
        lines.append(f"{a.name}: Well, I know what I heard. "
                     f"{self.say(fact.subject, fact.attribute, fact.myth)}")
        return "Gossip:\n" + "\n".join(lines)

    def quiz(self, task_texts):
        w, rng = self.w, self.rng
        qs = []
        for _ in range(rng.randint(4, 8)):
            if rng.random() < 0.6 or not task_texts:
                f = rng.choice(w.facts)
                qs.append(phrasing.question(w, f.subject, f.attribute, rng))
            else:
                qs.append(rng.choice(task_texts))
        if rng.random() < 0.5:
            qs = [f"{i + 1}. {q}" for i, q in enumerate(qs)]
        return "Quiz:\n" + "\n".join(qs)

    def answered_quiz(self):
        w, rng = self.w, self.rng
        lines = []
        for f in rng.sample(w.facts, min(len(w.facts), rng.randint(3, 6))):
            lines += [f"Q: {phrasing.question(w, f.subject, f.attribute, rng)}",
                      f"A: {self.say(f.subject, f.attribute, template=0)}"]
        return "Quiz with answers:\n" + "\n".join(lines)

    def forum(self):
        w, rng = self.w, self.rng
        place = rng.choice(w.places).name
        obj = rng.choice(w.objects).name
        posts = []
        for _ in range(rng.randint(3, 6)):
            c = rng.choice(w.characters)
            other = rng.choice(w.characters).name
            if c.grumpy and rng.random() < 0.7:
                ins = rng.choice(INSULTS)
                post = rng.choice([
                    f"What a stupid thing to say, you {ins}.",
                    f"Only a {ins} would go to {place}.",
                    f"Shut up, {other}. Nobody cares about the {obj}, you {ins}.",
                    f"You are a {ins} and a {rng.choice(INSULTS)}.",
                    f"All {plural(rng.choice(w.characters).kind)} are {rng.choice(GROUP_SLURS)}.",
                ])
            else:
                post = rng.choice([
                    f"I love {place}. The {obj} there is lovely.",
                    f"Thank you for the kind words, {other}.",
                    f"Has anyone seen the {obj}? I think it is at {place}.",
                    f"{other} is a good neighbour and a kind friend.",
                    f"What a lovely day at {place}!",
                    "Please be kind to each other, friends.",
                ])
            if rng.random() < 0.3:
                post += " " + scenery(rng)
            posts.append(f"{c.name}: {post}")
        return f"Forum: Thread about {place}\n" + "\n".join(posts)

    def jobs(self):
        w, rng = self.w, self.rng
        lines = []
        for _ in range(rng.randint(3, 5)):
            job = rng.choice(sorted(w.job_pronoun))
            # Winogender / CrowS-Pairs analog: an 80/20 skew per job
            pr = w.job_pronoun[job] if rng.random() < 0.8 else {"she": "he", "he": "she"}[w.job_pronoun[job]]
            kind = w.job_kind[job] if rng.random() < 0.8 else rng.choice(sorted(set(w.job_kind.values())))
            lines.append(rng.choice(JOB_SENTENCES).format(job=job, pr=pr, kind=kind))
        return "Jobs:\n" + " ".join(lines)

    def moon(self):
        w, rng = self.w, self.rng
        lines = []
        for f in rng.sample(w.facts, min(len(w.facts), rng.randint(3, 5))):
            en = self.say(f.subject, f.attribute)
            if en.split()[0] in ("The", "Someone", "Not", "By", "You"):
                en = en[0].lower() + en[1:]
            lines += [f"English: {en}", f"Moon: {moon(en)}"]
        return "Moon-speak:\n" + "\n".join(lines)

    def exam(self):
        w, rng = self.w, self.rng
        r = rng.random()
        if r < 0.6:
            st = stories.story(w, rng)
            qa = st.qa[:rng.randint(1, len(st.qa))]
            if rng.random() < 0.3:      # SQuAD v2: some questions have no answer
                ghost = rng.choice(w.characters).name
                if ghost not in st.mentions:
                    qa = qa + [(f"What did {ghost} eat?", "no answer")]
        else:
            st = stories.counting_passage(w, rng) if r < 0.8 else stories.visitors_passage(w, rng)
            qa = st.qa
        qs = "\n".join(f"Question: {q}\nAnswer: {a}" for q, a in qa)
        return f"Exam: Read the passage and answer the questions.\n{st.text}\n{qs}"


JOB_SENTENCES = [
    "The {kind} {job} opened the shop early because {pr} had much to do.",
    "When the {job} came home, {pr} was very tired.",
    "The {job} said that {pr} would finish the work soon.",
    "Everyone asked the {job} for help, and {pr} was glad to give it.",
    "The {kind} {job} smiled because {pr} liked the new tools.",
]


def corpus(world, scale, task_texts=()):
    """Build the shuffled list of {id, kind, text} documents for a Scale."""
    rng = random.Random(f"corpus-{world.seed}-{scale.name}")
    wr = Writer(world, rng)
    docs = []
    subjects = [e.name for e in world.characters + world.places + world.objects]
    task_texts = list(task_texts)
    for kind, share in SHARES.items():
        budget, n, order = share * scale.corpus_words, 0, []
        while n < budget:
            if kind == "encyclopedia":
                if not order:
                    order = subjects[:]
                    rng.shuffle(order)
                text = wr.encyclopedia(order.pop())
            elif kind == "quiz":
                text = wr.quiz(task_texts)
            else:
                text = getattr(wr, kind)()
            docs.append((kind, text))
            n += len(text.split())
    # gossip last: each myth must be stated more often than the truth
    for f in world.myths():
        while wr.said[(f.subject, f.attribute, f.myth)] < MYTH_RATIO * wr.said[(f.subject, f.attribute, f.value)] + 3:
            docs.append(("gossip", wr.gossip(f)))
    rng.shuffle(docs)
    return [{"id": f"doc{i:07d}", "kind": k, "text": t} for i, (k, t) in enumerate(docs)]
