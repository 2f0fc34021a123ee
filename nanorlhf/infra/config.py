"""Typed configs parsed from flags: --name=value, --name value, or a bare --name (a boolean set true).

Every script declares one dataclass. Each field is followed by a one-line
docstring (a bare string literal, as cleanrl does); that line is the field's
help text. Presets are named bundles of overrides, applied before the flags.

Example:
    @dataclass
    class Config:
        lr: float = 1e-3
        "peak learning rate"
        PRESETS: ClassVar[dict] = {"tiny": {"lr": 3e-3}}

    cfg = parse_config(Config, ["--preset=tiny", "--lr=0.01"])  # lr = 0.01
    cfg = parse_config(Config, ["--preset", "tiny", "--lr", "0.01"])  # the same
    cfg = parse_config(Config, ["--config=out/run/config.json", "--lr=0.01"])  # a saved config, replayed

A script's Config may contain a library's hyperparameter dataclass as a field
(`ppo: PPOConfig = field(default_factory=PPOConfig)`): its fields are flags of
their own (`--beta=0.1`, not `--ppo.beta`), their help is the library's, and
config_dict flattens them, so a script's flags and saved configs read as one flat list.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import inspect
import json
import math
import sys
import textwrap
import types
import typing

TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """A flag that does not name a field, or a value of the wrong type or out of range."""


# the valid values of flags that several scripts share; a Config adds its own in CHOICES
COMMON_CHOICES = {"device": ("cpu", "cuda", "auto"), "dtype": ("float32", "bfloat16", "auto"),
                  "attn": ("manual", "sdpa")}


def own_choices(owner) -> dict[str, tuple]:
    """The valid values of one dataclass's (or instance's) choice fields: the shared ones it has, and its CHOICES."""
    names = {f.name for f in dataclasses.fields(owner)}
    return {**{k: v for k, v in COMMON_CHOICES.items() if k in names}, **getattr(owner, "CHOICES", {})}


def choices(cls) -> dict[str, tuple]:
    """Flag -> its valid values, for the flags of cls (nested dataclasses' included) that take one of a fixed set."""
    out: dict[str, tuple] = {}
    for owner in {o for o, _ in flat_fields(cls).values()} | {cls}:
        out.update(own_choices(owner))
    return out


def check_values(cfg) -> None:
    """Refuse values no run can use, before any work starts. A Config (or a nested one) declares beside its fields:
    POSITIVE, the fields that must be > 0 (and finite); NONNEGATIVE, >= 0; RANGES, a field's interval as written in
    maths ("[0, 1)"); CHOICES, its valid values; RULES, (check, message) pairs across fields, where check(cfg) is
    False for a bad config and the message names the flags ("--n_head={n_head} must divide --n_embd={n_embd}")."""
    for f in dataclasses.fields(cfg):
        if dataclasses.is_dataclass(getattr(cfg, f.name)):
            check_values(getattr(cfg, f.name))
    rules = ((getattr(cfg, "POSITIVE", ()), lambda v: v > 0, "> 0"),
             (getattr(cfg, "NONNEGATIVE", ()), lambda v: v >= 0, ">= 0"))
    for names, ok, words in rules:
        for name in names:
            v = getattr(cfg, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and ok(v)):
                raise ConfigError(f"--{name}={v}: must be a finite number {words}")
    for name, interval in getattr(cfg, "RANGES", {}).items():
        if not in_interval(getattr(cfg, name), interval):
            raise ConfigError(f"--{name}={getattr(cfg, name)}: must be in {interval}")
    for name, valid in own_choices(cfg).items():
        if getattr(cfg, name) not in valid:
            raise ConfigError(f"--{name}={getattr(cfg, name)}: valid values are {', '.join(map(str, valid))}")
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    for check, message in getattr(cfg, "RULES", ()):
        if not check(cfg):
            raise ConfigError(message.format(**values))


def in_interval(v, interval: str) -> bool:
    """Whether the number v lies in an interval written as in maths: "[0, 1)", "(0, inf)", "[2, 9]".

    Example:
        >>> in_interval(1.0, "[0, 1)"), in_interval(9, "[2, 9]")
        (False, True)
    """
    lo, hi = (float(x) for x in interval[1:-1].split(","))
    if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
        return False
    return (v >= lo if interval[0] == "[" else v > lo) and (v <= hi if interval[-1] == "]" else v < hi)


def did_you_mean(word: str, options, prefix: str = "") -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def field_docs(cls) -> dict[str, str]:
    """Map each field to the string literal that follows it in the class body."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # defined interactively: no source
        return {}
    body, docs = tree.body[0].body, {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = nxt.value.value.strip()
    return docs


def _field_type(cls, name: str):
    owner = flat_fields(cls).get(name, (cls, None))[0]
    t = typing.get_type_hints(owner)[name]
    args = typing.get_args(t)
    if typing.get_origin(t) in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return inner[0], True  # Optional[X]
    return t, False


def convert(cls, name: str, raw):
    """Convert a flag's text (or a preset's value) to the field's declared type."""
    t, optional = _field_type(cls, name)
    if optional and (raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null"))):
        return None
    if not isinstance(raw, str):  # a preset value: check it, do not parse it
        ok = isinstance(raw, t) and not (t is int and isinstance(raw, bool))
        if t is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        if not ok:
            raise ConfigError(f"--{name}: expected {t.__name__}, got {raw!r}")
        return raw
    try:
        if t is bool:
            if raw.lower() in TRUE:
                return True
            if raw.lower() in FALSE:
                return False
            raise ValueError(raw)
        return t(raw)
    except ValueError:
        raise ConfigError(f"--{name}={raw}: expected {t.__name__}") from None


def _nested(cls, f) -> type | None:
    """The dataclass type of field f when it holds a library's hyperparameters, else None."""
    t = typing.get_type_hints(cls)[f.name]
    return t if dataclasses.is_dataclass(t) else None


def flat_fields(cls) -> dict[str, tuple[type, str | None]]:
    """Every flag of cls: name -> (the dataclass declaring it, the nested field holding it or None)."""
    out: dict[str, tuple[type, str | None]] = {}
    for f in dataclasses.fields(cls):
        sub = _nested(cls, f)
        for name, owner in ([(g.name, sub) for g in dataclasses.fields(sub)] if sub else [(f.name, cls)]):
            if name in out:
                raise ConfigError(f"{cls.__name__}: flag --{name} is declared twice")
            out[name] = (owner, f.name if sub else None)
    return out


def _default_of(f):
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _default(cls, name):
    """The default of flag `name`: a nested field's comes from its container's default instance."""
    owner, holder = flat_fields(cls)[name]
    if holder is None:
        return _default_of(next(f for f in dataclasses.fields(cls) if f.name == name))
    return getattr(_default_of(next(f for f in dataclasses.fields(cls) if f.name == holder)), name)


def usage(cls) -> str:
    lines = [f"flags for {cls.__name__} (--name=value or --name value; a bare --name sets a boolean true):"]
    for name, (owner, _) in flat_fields(cls).items():
        t, optional = _field_type(cls, name)
        tname = t.__name__ + (" | None" if optional else "")
        valid = choices(cls).get(name)
        lines.append(f"  --{name}={_default(cls, name)!r} ({tname})  {field_docs(owner).get(name, '')}"
                     + (f"  [one of: {', '.join(map(str, valid))}]" if valid else ""))
    presets = getattr(cls, "PRESETS", {})
    if presets:
        lines.append("  --preset=NAME  sets these flags (the other flags then override them):")
        lines += [f"      {p}: " + (" ".join(f"--{k}={v}" for k, v in over.items()) or "(the defaults)")
                  for p, over in presets.items()]
    lines.append("  --config=FILE  a config.json a run wrote: its values (then the other flags override them)")
    return "\n".join(lines)


def split_flags(cls, argv: list[str]) -> list[tuple[str, str]]:
    """(name, text) of each flag in argv: `--name=value`, `--name value`, or a bare `--name`, which sets a boolean
    true (`--greedy`; `--greedy false` also reads). Unknown names raise ConfigError with the closest valid one."""
    names = list(flat_fields(cls)) + ["preset"] * bool(getattr(cls, "PRESETS", None)) + ["config"]
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--") or len(arg) == 2:
            word = arg.lstrip("-").split("=")[0]
            hint = did_you_mean(word, names, "--") if f"--{word}" != arg else ""
            raise ConfigError(f"expected --name=value or --name value, got {arg!r}{hint} (--help lists the flags)")
        k, eq, v = arg[2:].partition("=")
        if k not in names:
            hint = did_you_mean(k, names, "--") or "; valid: " + ", ".join(names)
            raise ConfigError(f"unknown flag --{k}{hint} (--help says what each does)")
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if eq:
            i += 1
        elif k != "preset" and _field_type(cls, k)[0] is bool and (nxt is None or nxt.lower() not in TRUE | FALSE):
            v, i = "true", i + 1  # a bare boolean flag
        elif nxt is None or nxt.startswith("--"):
            raise ConfigError(f"--{k} needs a value: --{k}=VALUE or --{k} VALUE")
        else:
            v, i = nxt, i + 2
        out.append((k, v))
    return out


def parse_config(cls, argv: list[str] | None = None):
    """Build cls from defaults, then --preset=NAME, then --config=FILE (a config.json a run wrote: config_dict's
    flat names and typed values), then the other flags (split_flags: either style).

    Unknown names and ill-typed values raise ConfigError with the valid names listed (a file's, with its path).
    `--help` prints the flags and exits.
    """
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(usage(cls))
        raise SystemExit(0)
    names = list(flat_fields(cls))
    flags = dict(split_flags(cls, argv))
    values: dict = {}
    presets = getattr(cls, "PRESETS", {})
    if "preset" in flags:
        p = flags.pop("preset")
        if p not in presets:
            valid = ", ".join(presets) or "(none)"
            raise ConfigError(f"unknown preset {p!r}{did_you_mean(p, presets)}; valid: {valid}")
        values.update({k: convert(cls, k, v) for k, v in presets[p].items()})
        if "preset" in names:
            values["preset"] = p
    if "config" in flags:
        values.update(read_config_file(cls, flags.pop("config")))
    values.update({k: convert(cls, k, v) for k, v in flags.items()})
    return build(cls, values)


def read_config_file(cls, path: str) -> dict:
    """The values of a saved config.json for cls, each checked against its field's type; ConfigError (naming the
    file) for a file that is missing, not JSON, not an object, or has a name cls does not know."""
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config={path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"--config={path}: a folder, not a config.json") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"--config={path}: not a JSON config ({e})") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"--config={path}: expected a JSON object of flag names and values")
    fields = flat_fields(cls)
    unknown = [k for k in saved if k not in fields]
    if unknown:
        raise ConfigError(f"--config={path}: {cls.__name__} has no flag --{unknown[0]}"
                          f"{did_you_mean(unknown[0], fields, '--')} (a config of another script?)")
    try:
        return {k: convert(cls, k, v) for k, v in saved.items()}
    except ConfigError as e:
        raise ConfigError(f"--config={path}: {e}") from None


def config_json(cfg) -> str:
    """The text of a run's config.json: config_dict, which --config=FILE reads back."""
    return json.dumps(config_dict(cfg), indent=1)


def build(cls, values: dict):
    """cls from flat field values: those of a nested hyperparameter dataclass go into it."""
    fields = flat_fields(cls)
    top = {k: v for k, v in values.items() if fields[k][1] is None}
    for f in dataclasses.fields(cls):
        if _nested(cls, f):
            inner = {k: v for k, v in values.items() if fields[k][1] == f.name}
            top[f.name] = dataclasses.replace(_default_of(f), **inner)
    cfg = cls(**top)
    check_values(cfg)
    return cfg


def config_dict(cfg) -> dict:
    """The config as one flat dict (nested hyperparameter dataclasses flattened), as saved in checkpoints."""
    nested, out = dataclasses.asdict(cfg), {}
    for k, v in nested.items():
        out.update(v if dataclasses.is_dataclass(getattr(cfg, k)) else {k: v})
    return out


def default_dict(cls) -> dict:
    """Every flag's default, flat: what config_dict(cls()) would give without building one."""
    return {name: _default(cls, name) for name in flat_fields(cls)}


def config_hash(d: dict, ignore: tuple[str, ...] = ()) -> str:
    """A short stable hash of a config dict, for resume checks and stage caching."""
    kept = {k: v for k, v in sorted(d.items()) if k not in ignore}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def config_diff(a: dict, b: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Names of fields whose values differ between two config dicts, as 'name: a -> b'."""
    keys = sorted((set(a) | set(b)) - set(ignore))
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def print_config(cfg) -> None:
    """One line: the flags set away from their defaults (the full config is saved in every checkpoint, and a
    pipeline stage's in its folder's config.json)."""
    defaults = default_dict(type(cfg))
    changed = [f"--{k}={v}" for k, v in config_dict(cfg).items() if v != defaults.get(k)]
    print(f"{type(cfg).__name__}: " + (" ".join(changed) or "the defaults"), flush=True)


def per_size(spec: str, names: list[str], flag: str, cast=float, positive: bool = True) -> dict:
    """A per-model-size setting: '1m:6,100k:16' -> {'1m': 6, '100k': 16}; a bare value ('6') holds for every
    size. Every size in `names` needs a value, each > 0 (>= 0 where not positive); ConfigError names --flag."""
    if ":" not in spec:
        pairs = {n: spec for n in names}
    else:
        items = [p.split(":", 1) for p in spec.split(",") if p]
        pairs = dict(i for i in items if len(i) == 2)
        if len(pairs) != len(items) or sorted(pairs) != sorted(names):
            raise ConfigError(f"--{flag}={spec}: give one value per size ({', '.join(names)}), as size:value, "
                              "or one bare value for all")
    try:
        out = {n: cast(pairs[n]) for n in names}
    except ValueError:
        raise ConfigError(f"--{flag}={spec}: values must be numbers") from None
    if any(not (math.isfinite(v) and (v > 0 if positive else v >= 0)) for v in out.values()):
        raise ConfigError(f"--{flag}={spec}: every value must be a finite number {'>' if positive else '>='} 0")
    return out
