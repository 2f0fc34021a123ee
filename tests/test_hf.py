"""An exported tiny policy and RM through the calls Hugging Face users make, each against the project's own forward
(1e-4), and a folder saved again by transformers coming back with the same weights. Skipped where transformers is
absent (it is not a requirement of the project: pip install transformers to run these)."""
import os
import re

import pytest
import torch

from nanorlhf.checkpoint import load_checkpoint, load_model
from nanorlhf.chat import chat_prompt
from nanorlhf.generate import SamplingConfig, generate
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.interop.export import ExportConfig, export
from nanorlhf.reward import score_texts

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
NEW = 12  # new tokens per greedy generation


@pytest.fixture(scope="module")
def hf(stages, tmp_path_factory):
    """The tiny SFT policy and RM exported, loaded by transformers, beside the project's own models."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for name, kind in (("sft", "gpt"), ("rm", "scalar")):
        ckpt = os.path.join(stages["out"], name, "ckpt.pt")
        export(ExportConfig(ckpt=ckpt, out=str(root / name)))
        model, tok, ck = load_model(ckpt, kind=kind, dropout=0.0)
        out[name] = {"dir": str(root / name), "model": model.eval(), "tok": tok, "ck": ck, "ckpt": ckpt}
    out["hf_tok"] = transformers.AutoTokenizer.from_pretrained(out["sft"]["dir"])
    out["hf_lm"] = transformers.AutoModelForCausalLM.from_pretrained(out["sft"]["dir"]).eval()
    out["prompts"] = [r["prompt"] for r in read_jsonl(os.path.join(stages["data"], "test_prompts.jsonl"), PROMPT)][:8]
    return out


def greedy_ids(model, tok, ids: list[int]) -> list[int]:
    """The project's greedy continuation of ids (nanorlhf/generate.py), stop token included."""
    ro = generate(model, [ids], SamplingConfig(max_new_tokens=NEW, greedy=True), stop_token=tok.eot_id,
                  pad_id=tok.pad_id)
    return ro.tokens[0, ro.prompt_len:][ro.response_mask[0, ro.prompt_len:].bool()].tolist()


def test_model_called_with_the_tokenizers_output(hf):
    """model(**tok(text)): the tokenizer returns input_ids and attention_mask only, and the logits equal the
    project's forward on the same ids (token_type_ids would add wte[0] to every position)."""
    tok, model = hf["sft"]["tok"], hf["sft"]["model"]
    for p in hf["prompts"]:
        enc = hf["hf_tok"](p, return_tensors="pt")
        assert set(enc) == {"input_ids", "attention_mask"} and enc["input_ids"][0].tolist() == tok.encode(p)
        with torch.no_grad():
            assert (hf["hf_lm"](**enc).logits - model(enc["input_ids"])).abs().max() < 1e-4


def test_generate_from_the_chat_template(hf):
    """generate(**apply_chat_template(msgs, add_generation_prompt=True, return_dict=True)) sees the project's chat
    ids, has its logits (1e-4), and continues greedily as the project's generate does; a system message is folded
    into the user turn."""
    tok, model = hf["sft"]["tok"], hf["sft"]["model"]
    for p in hf["prompts"]:
        inputs = hf["hf_tok"].apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                  return_dict=True, return_tensors="pt")
        ids = chat_prompt(tok, p)
        assert inputs["input_ids"][0].tolist() == ids
        with torch.no_grad():
            assert (hf["hf_lm"](**inputs).logits - model(inputs["input_ids"])).abs().max() < 1e-4
            out = hf["hf_lm"].generate(**inputs, max_new_tokens=NEW, do_sample=False)
        assert out[0, len(ids):].tolist()[:len(greedy_ids(model, tok, ids))] == greedy_ids(model, tok, ids)
    sys_msg = hf["hf_tok"].apply_chat_template([{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi?"}], add_generation_prompt=True)
    sys_msg = sys_msg["input_ids"] if hasattr(sys_msg, "keys") else sys_msg
    assert list(sys_msg) == chat_prompt(tok, "Be brief.\n\nHi?")


def test_text_generation_pipeline(hf):
    """pipeline("text-generation") on chat messages answers as the project's greedy sampler does; a prompt past the
    context is truncated from the left with handle_long_generation="hole" instead of failing."""
    tok, model = hf["sft"]["tok"], hf["sft"]["model"]
    gen = transformers.pipeline("text-generation", model=hf["sft"]["dir"])
    for p in hf["prompts"][:4]:
        reply = gen([{"role": "user", "content": p}], max_new_tokens=NEW, do_sample=False)
        want = tok.decode([i for i in greedy_ids(model, tok, chat_prompt(tok, p)) if i != tok.eot_id])
        assert reply[0]["generated_text"][-1]["content"].strip() == want.strip()
    long = " ".join(hf["prompts"]) * 4
    assert len(tok.encode(long)) > model.cfg.block_size
    reply = gen([{"role": "user", "content": long}], max_new_tokens=NEW, do_sample=False,
                handle_long_generation="hole")
    assert isinstance(reply[0]["generated_text"][-1]["content"], str)
    assert len(hf["hf_tok"](long, truncation=True)["input_ids"]) == model.cfg.block_size


def test_text_classification_pipeline_is_the_reward(hf, stages):
    """pipeline("text-classification") on a chat-templated turn returns r(x, y) with the RM's bias, as the project
    scores it (1e-4), so it orders every comparison's completions alike."""
    rm = hf["rm"]
    pipe = transformers.pipeline("text-classification", model=rm["dir"])
    rows = read_jsonl(os.path.join(stages["out"], "rm", "val_comparisons.jsonl"), ())[:6]
    prompts = [c["prompt"] for c in rows for _ in c["completions"]]
    texts = [x for c in rows for x in c["completions"]]
    chats = [pipe.tokenizer.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": t}],
                                                tokenize=False) for p, t in zip(prompts, texts)]
    got = torch.tensor([r["score"] for r in pipe(chats)])
    with torch.no_grad():
        want = score_texts(rm["model"], rm["tok"], prompts, texts, "cpu", rm["ck"]["extra"]["bias"])
    assert (got - want).abs().max() < 1e-4 and len(got) > 20


@pytest.mark.parametrize("name", ["sft", "rm"])
def test_the_model_cards_snippet_runs(hf, name, capsys):
    """The README.md written into the folder holds a Python snippet that runs as written."""
    card = open(os.path.join(hf[name]["dir"], "README.md"), encoding="utf-8").read()
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    exec(compile(snippet, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_a_folder_saved_again_by_transformers_comes_back(hf, tmp_path):
    """The policy loaded and saved again by transformers (as a trainer leaves it), then imported with --from_hf,
    has the original checkpoint's every weight."""
    hf["hf_lm"].save_pretrained(tmp_path / "again")
    hf["hf_tok"].save_pretrained(tmp_path / "again")
    export(ExportConfig(from_hf=str(tmp_path / "again"), out=str(tmp_path / "ckpt.pt")))
    a, b = load_checkpoint(hf["sft"]["ckpt"])["model"], load_checkpoint(tmp_path / "ckpt.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
