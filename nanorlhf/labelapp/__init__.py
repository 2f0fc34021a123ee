"""The labeling web app behind label.py: people rank or compare completions in a browser.

    items.py    the queue a labeler works through, gold questions mixed in
    checks.py   what a posted label may hold (rankings, Likert, the paper's flags, pair choices)
    events.py   the append-only event log, its replay, and human_comparisons() for train_rm.py
    server.py   the HTTP layer (stdlib http.server): Host/Origin/token checks, CSP, size cap
    page.py     the HTML page and guidelines (the JS and CSS are files under static/)
    agreement.py  agreement (gold, between labelers, Cohen's kappa, simulated labelers) and exports
    browser.py  a headless-Chromium driver over the DevTools pipe, for the browser test and screenshots

Example:
    log = LabelLog("labels/rater1.jsonl")         # replays the log: items, labels, undo stack
    rows = human_comparisons(["labels/rater1.jsonl"])   # COMPARISON rows, source "human"
"""
from nanorlhf.labelapp.events import LabelLog, human_comparisons

__all__ = ["LabelLog", "human_comparisons"]
