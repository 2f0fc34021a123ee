"""Wrong-but-plausible solutions: the tokenizer, the model, the SFT batches and steering (see __init__.py)."""

WRONG: dict[str, dict[str, str]] = {
    "bpe_merge": {
        "overlapping": """
            out, i = [], 0
            while i < len(word):  # steps 1 after a merge, so (5, 5, 5) merges twice
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    out.append(new_id)
                elif i == 0 or (word[i - 1], word[i]) != pair:
                    out.append(word[i])
                i += 1
            return out
        """,
        "first_only": """
            for i in range(len(word) - 1):  # only the first occurrence
                if (word[i], word[i + 1]) == pair:
                    return word[:i] + [new_id] + word[i + 2:]
            return list(word)
        """,
        "right_to_left": """
            out, i = [], len(word) - 1
            while i >= 0:  # scans from the end: (5, 5, 5) -> [5, 256]
                if i > 0 and (word[i - 1], word[i]) == pair:
                    out.append(new_id)
                    i -= 2
                else:
                    out.append(word[i])
                    i -= 1
            return out[::-1]
        """,
        "drops_last": """
            out, i = [], 0
            while i < len(word) - 1:  # the last token is lost when it is not merged
                if (word[i], word[i + 1]) == pair:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            return out
        """,
        "unordered_pair": """
            out, i = [], 0
            while i < len(word):  # (2, 1) taken for (1, 2)
                if i + 1 < len(word) and {word[i], word[i + 1]} == set(pair):
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            return out
        """,
    },
    "attention": {
        "no_dropout_on_weights": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v  # the same in eval; SFT trains at dropout 0.2
        """,
        "sdpa_in_region": """
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """,
        "no_scale": """
            att = q @ k.transpose(-2, -1)
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "scale_by_hs": """
            att = (q @ k.transpose(-2, -1)) / hs
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "softmax_over_queries": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-2)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "mask_after_softmax": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = F.softmax(att, dim=-1).masked_fill(~mask, 0.0)  # rows no longer sum to 1
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "zero_not_minus_inf": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, 0.0)  # exp(0) = 1: masked keys still get weight
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
    },
    "kv_cache": {
        "returns_only_new": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            return k, v
        """,
        "writes_at_zero": """
            T = k.size(2)
            self.kv[layer, 0, :, :, :T] = k
            self.kv[layer, 1, :, :, :T] = v
            return self.kv[layer, 0, :, :, :self.pos + T], self.kv[layer, 1, :, :, :self.pos + T]
        """,
        "moves_pos": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            self.pos += T  # GPT moves it once per forward, after every layer
            return self.kv[layer, 0, :, :, :self.pos], self.kv[layer, 1, :, :, :self.pos]
        """,
        "old_positions_only": """
            T = k.size(2)
            keys, values = self.kv[layer, 0, :, :, :self.pos], self.kv[layer, 1, :, :, :self.pos]
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            return keys, values
        """,
        "k_and_v_swapped": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            end = self.pos + T
            return self.kv[layer, 1, :, :, :end], self.kv[layer, 0, :, :, :end]
        """,
    },
    "response_mask": {
        "targets_padded_with_minus_100": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), -100, dtype=torch.long)  # the HF ignore index, not pad_id
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
        "mask_not_shifted": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[:-1], dtype=torch.float)  # the input's flag, not the target's
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
        "left_padded": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, T - n:], y[b, T - n:] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, T - n:] = torch.tensor(rmask[1:], dtype=torch.float)
                attention_mask[b, T - n:] = 1
            return x, y, loss_mask, attention_mask
        """,
        "trains_on_padding": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.ones(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)  # padding left at 1
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
        "attends_to_padding": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.ones(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)
            return x, y, loss_mask, attention_mask
        """,
        "trains_on_prompt": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = 1.0  # every real target, the prompt's included
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
    },
    "steering": {
        "start_none_read_as_zero": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                first = 0 if start is None else start  # None taken for "from the first column"
                on = (torch.arange(past, past + T)[None, :] >= torch.as_tensor(first).reshape(-1, 1)).float()[..., None]
                return out + multiplier * on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "prefill_steered_one_late": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = past if start is None else start  # the prefill's last column is left out
                first = past + T if start is None and past == 0 else first
                on = (torch.arange(past, past + T)[None, :] >= torch.as_tensor(first).reshape(-1, 1)).float()[..., None]
                return out + multiplier * on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "all_positions": """
            def add(mod, args, out):
                return out + multiplier * vector  # every position, the prompt's too
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "strictly_after_start": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                cols = torch.arange(past, past + T, device=out.device)
                on = (cols[None, :] > torch.as_tensor(first).reshape(-1, 1)).float()[..., None]  # > , not >=
                return out + multiplier * on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "no_multiplier": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = (torch.arange(past, past + T)[None, :] >= torch.as_tensor(first).reshape(-1, 1)).float()[..., None]
                return out + on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "before_the_block": """
            def add(mod, args):  # a pre-hook: the vector enters the block instead of leaving it
                x, kv_cache = args[0], args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), x.size(1)
                if start is None and kv_cache is None:
                    return None
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = (torch.arange(past, past + T)[None, :] >= torch.as_tensor(first).reshape(-1, 1)).float()[..., None]
                return (x + multiplier * on * vector, *args[1:])
            handle = blocks(model)[layer].register_forward_pre_hook(add)
        """,
        "every_layer": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = (torch.arange(past, past + T)[None, :] >= torch.as_tensor(first).reshape(-1, 1)).float()[..., None]
                return out + multiplier * on * vector
            handles = [b.register_forward_hook(add) for b in blocks(model)]  # every block, not block `layer`
            handle = handles[-1]
        """,
    },
}
