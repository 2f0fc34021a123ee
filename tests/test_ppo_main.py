"""train_ppo.main's wiring on the tiny world: what the script hands the experience and the update, two iterations in.

The unit and wiring tests check ppo.py and experience.py given their arguments; these check that the script
gives the right ones: the --beta of the flags (not 0, not the default), the RM's bias from its checkpoint, a
reference that stays pi_SFT while the policy moves, and rollouts drawn at --temperature. Each is recomputed here
from the checkpoints, not read back from the script.
"""
import pytest
import torch

import train_ppo
from nanorlhf import experience, masks
from nanorlhf.checkpoint import load_model
from nanorlhf.infra.config import parse_config
from nanorlhf.reward import score_sequences

BETA, TEMPERATURE = 0.5, 0.8


@pytest.fixture(scope="module")
def two_iterations(stages, monkeypatch_module):
    """train_ppo.main for two iterations at beta 0.5 and temperature 0.8, recording every experience it builds."""
    seen = []
    real = train_ppo.make_experience

    def spy(policy, ref, rm, value, ro, **kw):
        exp = real(policy, ref, rm, value, ro, **kw)
        seen.append({"ro": ro, "exp": {k: v.clone() if torch.is_tensor(v) else v for k, v in exp.items()}, **kw})
        return exp

    monkeypatch_module.setattr(train_ppo, "make_experience", spy)
    flags = ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt", f"--rm={stages['out']}/rm/ckpt.pt",
             f"--data_dir={stages['data']}", f"--out_dir={stages['out']}/ppo_wiring", "--iterations=2",
             f"--beta={BETA}", f"--temperature={TEMPERATURE}", "--lr=3e-3", "--dtype=float32"]  # compared in fp32
    res = train_ppo.main(parse_config(train_ppo.Config, flags))
    return {"seen": seen, "res": res, "stages": stages}


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_flags_beta_is_the_kl_penalty_of_every_response_token(two_iterations):
    """At iteration 2 (the policy has moved, so the KL is not 0) every response token but the last carries
    -0.5 * (log pi - log pi_SFT): the beta of the flags, in the reward GAE sees."""
    it2 = two_iterations["seen"][1]
    exp, ro = it2["exp"], it2["ro"]
    assert it2["beta"] == BETA
    kl = (exp["logprobs"] - exp["ref_logprobs"]) * ro.response_mask
    assert kl.abs().sum() > 1e-3
    not_last = ro.response_mask.bool().clone()
    not_last[torch.arange(len(not_last)), masks.last_token_index(ro.response_mask)] = False
    assert torch.allclose(exp["rewards"][not_last], -BETA * kl[not_last], atol=1e-5)


def test_the_rms_bias_from_its_checkpoint_is_subtracted_from_the_score(two_iterations):
    """The score is the RM read at each response's last token (end token appended where cut) minus the bias
    section 3.5's normalisation stored in the RM checkpoint."""
    s = two_iterations["stages"]
    rm, _, ck = load_model(f"{s['out']}/rm/ckpt.pt", kind="scalar", dropout=0.0)
    bias = ck["extra"]["bias"]
    assert abs(bias) > 1e-4
    for it in two_iterations["seen"]:
        ro = it["ro"]
        t, a, r = experience.with_end_token(ro.tokens, ro.attention_mask, ro.response_mask, ro.stop_token,
                                            rm.cfg.block_size)
        with torch.no_grad():
            raw = score_sequences(rm.eval(), t, a, r, 0.0)
        assert torch.allclose(it["exp"]["score"], raw - bias, atol=1e-4)


def test_the_reference_stays_pi_sft_while_the_policy_moves(two_iterations):
    """After an update the reference's log-probs are still those of the SFT checkpoint, and the policy's are not:
    pi_SFT is frozen and apart from pi_RL."""
    s, it2 = two_iterations["stages"], two_iterations["seen"][1]
    sft, _, _ = load_model(f"{s['out']}/sft/ckpt.pt", dropout=0.0)
    ro, resp = it2["ro"], it2["ro"].response_mask.bool()
    with torch.no_grad():
        want = masks.token_logprobs(sft.eval()(ro.tokens, attention_mask=ro.attention_mask), ro.tokens, TEMPERATURE)
    assert torch.allclose(it2["exp"]["ref_logprobs"][resp], want[resp], atol=1e-4)
    assert (it2["exp"]["logprobs"][resp] - want[resp]).abs().max() > 1e-3
    policy = two_iterations["res"]["policy"]
    assert any(not torch.equal(p, q) for p, q in zip(policy.state_dict().values(), sft.state_dict().values()))


def test_rollouts_are_drawn_at_the_flags_temperature(two_iterations):
    """The log-probs the rollout recorded while sampling are the scoring pass's, both at --temperature 0.8."""
    for it in two_iterations["seen"]:
        ro, resp = it["ro"], it["ro"].response_mask.bool()
        assert torch.allclose(ro.logprobs[resp], it["exp"]["logprobs"][resp], atol=1e-4)
