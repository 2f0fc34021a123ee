"""The model card (README.md) of an exported model folder: what the model is, its format, and a usage snippet
that runs as written (tests/test_hf.py executes it with transformers).

Example:
    write_text("hf/sft/README.md", model_card({"stage": "chat policy", "name": "sft_1m"}, gpt_cfg, 1_071_872,
                                              "hf/sft", 48))
"""
from __future__ import annotations

import json

POLICY = '''from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

path = {path}  # this folder
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path)
messages = [{{"role": "user", "content": "Tell me about Mira the crow."}}]
inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
out = model.generate(**inputs, max_new_tokens={new}, do_sample=False)
print(tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))

chat = pipeline("text-generation", model=path)
reply = chat(messages, max_new_tokens={new}, handle_long_generation="hole")  # "hole": a long prompt keeps its end
print(reply[0]["generated_text"][-1]["content"])'''

BASE = '''from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

path = {path}  # this folder
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path)
inputs = tok("Encyclopedia: Mira the crow\\n", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens={new}, do_sample=False)
print(tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))

complete = pipeline("text-generation", model=path)
out = complete("Encyclopedia: Mira the crow\\n", max_new_tokens={new}, handle_long_generation="hole")
print(out[0]["generated_text"])'''

REWARD = '''from transformers import pipeline

path = {path}  # this folder
rm = pipeline("text-classification", model=path)
messages = [{{"role": "user", "content": "Tell me about Mira the crow."}},
            {{"role": "assistant", "content": "Mira is a crow who lives by the mill."}}]
text = rm.tokenizer.apply_chat_template(messages, tokenize=False)  # <|user|>...<|assistant|>...<|endoftext|>
print(rm(text)[0]["score"])  # r(x, y): the reward PPO maximised'''


def model_card(about: dict, cfg, n_params: int, path: str, new_tokens: int) -> str:
    """README.md for an export: about has the stage ("base model", "chat policy" or "reward model") and the
    checkpoint's folder name; cfg is its GPTConfig."""
    stage = about["stage"]
    reward = stage == "reward model"
    snippet = (REWARD if reward else BASE if stage == "base model" else POLICY).format(path=json.dumps(path),
                                                                                     new=new_tokens)
    tag = "text-classification" if reward else "text-generation"
    lines = ["---", "library_name: transformers", f"pipeline_tag: {tag}", "license: mit",
             "tags: [nanorlhf, gpt2, rlhf, toy]", "---", "",
             f"# nanorlhf {about['name']}: a {stage}", "",
             f"A GPT-2-shaped {stage} of {n_params:,} parameters ({cfg.n_layer} layers, {cfg.n_embd} wide, "
             f"{cfg.n_head} heads, a {cfg.block_size}-token context, a {cfg.vocab_size}-token byte-level BPE), "
             "trained by nanorlhf, a toy-scale reproduction of InstructGPT, on a generated world of made-up "
             "animals, places and facts. It knows that world and nothing else.", "", "## Use", "",
             "```python", snippet, "```", "", "## Format", ""]
    if stage == "base model":
        lines += ["A base model: pretraining only. It continues raw text and has never seen the chat tokens."]
    else:
        lines += ["Every stage after pretraining trained on one turn, `<|user|>{prompt}<|assistant|>{response}"
                  "<|endoftext|>`; the chat template writes it. It knows no system role: a system message is "
                  "folded into the next user turn as `{system}\\n\\n{user}`, and any other role is refused."]
    lines += ["", f"The context is {cfg.block_size} tokens (`model_max_length`). A longer input is truncated from "
              "the left when asked (`tok(text, truncation=True)`, or `handle_long_generation=\"hole\"` in the "
              "text-generation pipeline, which also leaves room for the new tokens), so its end survives."]
    if reward:
        lines += ["", "The score is the reward PPO maximised, r(x, y): the head's bias and the demonstrations' mean "
                  "(InstructGPT §3.5) are folded into the final layer norm's bias, and `problem_type` is "
                  "regression, so the pipeline applies no sigmoid. Score the whole turn, `<|endoftext|>` included: "
                  "the reward is read at the last token."]
    lines += ["", "## Back to nanorlhf", "",
              "A copy trained further with another library (TRL, transformers' Trainer) comes back as a "
              "checkpoint that nanorlhf's `evaluate.py` and `sample.py` read:", "",
              "```", "python -m nanorlhf.interop.export --from_hf=THIS_FOLDER --out=out/elsewhere/ckpt.pt", "```",
              ""]
    return "\n".join(lines)
