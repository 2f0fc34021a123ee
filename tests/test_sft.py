"""SFT: the loss sees response tokens only (an explicit mask, checked token by token)."""
import torch

from nanorlhf.chat import chat_example
from nanorlhf.sft import collate, sft_loss


class ToyTok:
    user_id, assistant_id, eot_id, pad_id = 90, 91, 92, 93

    def encode(self, text):
        return [ord(c) - 96 for c in text]  # 'a' -> 1


def test_chat_example_mask_covers_response_and_end_token():
    """The response mask is 1 exactly on the response tokens and <|endoftext|>."""
    ids, mask = chat_example(ToyTok(), "ab", "cde")
    assert ids == [90, 1, 2, 91, 3, 4, 5, 92]
    assert mask == [0, 0, 0, 0, 1, 1, 1, 1]


def test_collate_shifts_targets_and_masks_prompt_and_padding():
    """x/y are shifted by one; loss_mask is 1 iff the target is a response token; padding is masked."""
    tok = ToyTok()
    x, y, lm, am = collate([chat_example(tok, "ab", "cde"), chat_example(tok, "a", "z")], tok.pad_id)
    assert x[0].tolist() == [90, 1, 2, 91, 3, 4, 5]
    assert y[0].tolist() == [1, 2, 91, 3, 4, 5, 92]
    assert lm[0].tolist() == [0, 0, 0, 1, 1, 1, 1]        # targets 3, 4, 5, eot
    assert x[1].tolist() == [90, 1, 91, 26, 93, 93, 93]
    assert lm[1].tolist() == [0, 0, 1, 1, 0, 0, 0]        # targets 26 ('z') and eot; then padding
    assert am[1].tolist() == [1, 1, 1, 1, 0, 0, 0]


def test_sft_loss_ignores_masked_positions():
    """Changing logits at prompt or padding positions does not change the loss."""
    tok = ToyTok()
    x, y, lm, _ = collate([chat_example(tok, "ab", "cde"), chat_example(tok, "a", "z")], tok.pad_id)
    logits = torch.randn(2, x.size(1), 100)
    base = sft_loss(logits, y, lm)
    noisy = logits + 100 * torch.randn_like(logits) * (1 - lm)[..., None]
    assert torch.allclose(base, sft_loss(noisy, y, lm))
    assert not torch.allclose(base, sft_loss(logits + 5 * torch.randn_like(logits) * lm[..., None], y, lm))
