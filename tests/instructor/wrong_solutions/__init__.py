"""The grader's fixtures, on the instructor's side (never in the handout): wrong-but-plausible solutions of every
assignment (model.py, losses.py, critic_free.py), correct solutions written another way (variants.py) and cheats (cheats.py).

Each solution is the body of one assignment region (dedented; the grader's splice indents it to the region's
markers). tests/instructor/test_grading.py puts them into copies of the handout and grades each copy with the
real grader (and test_assignments.py's class the variants of IN_THE_CLASS): every wrong solution and cheat must
fail, every variant pass, so a grading test that stops pinning the maths, or a way round the grader that starts
to work, fails CI. Not test modules (no test_ prefix).
"""

from .cheats import CHEATS, Cheat, drop_copy_files
from .critic_free import RIGHT as _CRITIC_FREE_RIGHT
from .critic_free import WRONG as _CRITIC_FREE
from .losses import WRONG as _LOSSES
from .model import WRONG as _MODEL
from .variants import RIGHT as _RIGHT

WRONG: dict[str, dict[str, str]] = {**_MODEL, **_LOSSES, **_CRITIC_FREE}
RIGHT: dict[str, dict[str, str]] = {**_RIGHT, **_CRITIC_FREE_RIGHT}
# the variants test_assignments.py's class copy holds: those of the assignments whose wrong solutions and cheats
# fill every round of test_grading.py
IN_THE_CLASS = ("attention", "gae", "policy_loss")
__all__ = ["CHEATS", "Cheat", "IN_THE_CLASS", "RIGHT", "WRONG", "drop_copy_files"]
