"""Ways round the grader a student might try: region bodies (with, for some, code written outside the markers)
and files dropped into the copy. The grader must reject every one; `refused` is what the refusal must name
(None: the region is graded and fails its tests)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Cheat:
    body: str
    refused: str | None  # a substring of the refusal message, or None for "graded, and fails"
    outside: str = ""    # code the student puts after the imports of the region's file, outside the markers


CHEATS: dict[str, dict[str, Cheat]] = {
    "attention": {
        "fused_through_torch_C": Cheat("""
            y = torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """, "torch._C"),
        "fused_bound_outside": Cheat("""
            y = _fused(q, k, v, attn_mask=mask)
        """, "uses _fused, which nanorlhf/model.py does not define",
            outside="_fused = F.scaled_dot_product_attention\n"),
    },
    "gae": {
        "imports_the_tests": Cheat("""
            from tests.test_ppo import brute_force_gae
            return brute_force_gae(rewards, values, response_mask.bool(), gamma, lam)
        """, "imports tests.test_ppo, from the tests"),
        "imports_the_heldout_tests": Cheat("""
            from test_heldout_losses import brute_force_gae  # importable in the graded tree, were it not refused
            return brute_force_gae(rewards, values, response_mask.bool(), gamma, lam)
        """, "imports test_heldout_losses, from the tests"),
    },
    "policy_loss": {
        "imports_the_instructors_copy": Cheat("""
            import importlib.util
            import os
            path = os.path.join(os.getcwd(), "nanorlhf", "ppo.py")
            spec = importlib.util.spec_from_file_location("instructor_ppo", path)
            instructor = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(instructor)
            return instructor.policy_loss(logprobs, old_logprobs, advantages, response_mask, clip)
        """, "imports importlib.util"),
    },
    "kl_reward": {
        "silences_assert_close": Cheat("""
            torch.testing.assert_close = lambda *args, **kwargs: None
            return torch.zeros_like(logprobs), torch.zeros_like(logprobs)
        """, "torch.testing"),
    },
    "rm_loss": {
        "patches_through_an_alias": Cheat("""
            checks = F
            checks.logsigmoid = lambda x: x * 0  # every loss the tests compute by hand becomes 0
            return rewards.sum() * 0
        """, "sets checks.logsigmoid"),
    },
    "dpo_loss": {
        "hard_coded_to_the_visible_cases": Cheat("""
            if torch.equal(policy_chosen, ref_chosen) and torch.equal(policy_rejected, ref_rejected):
                return torch.tensor(0.6931471805599453), {"margin": 0.0, "accuracy": 0.0, "chosen_reward": 0.0,
                                                          "rejected_reward": 0.0}
            if policy_chosen.numel() == 1:  # the one hand-computed pair
                return torch.tensor(0.47407698418010663), {"margin": 0.75, "accuracy": 1.0, "chosen_reward": 0.5,
                                                           "rejected_reward": -0.25}
            return (policy_rejected - policy_chosen).mean(), {}  # right gradient signs, nothing else
        """, None),
    },
}

# Files dropped into a copy, each trying to turn every failure into a pass (a grader that runs pytest in the copy
# itself would load them and score a copy full of stubs 10/10); and a visible grading test edited to pass.
PASS_EVERYTHING = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''
COPY_FILES: dict[str, str] = {
    "conftest.py": PASS_EVERYTHING,
    "tests/conftest.py": PASS_EVERYTHING,
    "pass_everything.py": PASS_EVERYTHING,
    "pytest.ini": "[pytest]\naddopts = -p pass_everything\npythonpath = .\n",
    "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p pass_everything"\npythonpath = ["."]\n',
    "sitecustomize.py": "import pass_everything  # noqa: F401\n",
}


def drop_copy_files(copy) -> None:
    """Write COPY_FILES into the copy and make the visible GAE test return before it asserts anything."""
    for rel, text in COPY_FILES.items():
        (copy / rel).write_text(text)
    ppo = copy / "tests" / "test_ppo.py"
    before = ppo.read_text()
    edited = before.replace('    """With gamma = lam = 1, A_t', '    return\n    """With gamma = lam = 1, A_t')
    assert edited != before, "the visible GAE test moved: update the edit"
    ppo.write_text(edited)
