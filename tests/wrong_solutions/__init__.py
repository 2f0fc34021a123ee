"""Wrong-but-plausible solutions of every assignment: the bugs a student is likely to write.

Each entry is the body of one assignment region (dedented; the grader's splice indents it
to the region's markers). tests/test_grading.py puts them into a copy of the solutions and checks
that the grader fails every one, so a grading test that stops pinning the maths fails CI.
Not test modules (no test_ prefix): nothing here is collected. One module per area: model.py, losses.py.
"""

from .losses import WRONG as _LOSSES
from .model import WRONG as _MODEL

WRONG: dict[str, dict[str, str]] = {**_MODEL, **_LOSSES}
