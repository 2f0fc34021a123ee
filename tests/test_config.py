"""Config parsing: typed --name=value flags, presets, clear errors; a library's hyperparameter dataclass nested in a script's Config."""
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from nanorlhf.infra.config import (ConfigError, config_dict, config_diff, config_hash, default_dict, field_docs,
                             parse_config, per_size, usage)


@dataclass
class Cfg:
    lr: float = 1e-3
    """peak learning rate"""
    steps: int = 10
    """optimisation steps"""
    name: str = "run"
    """a name"""
    fused: bool = False
    """use the fast path"""
    init: str | None = None
    """optional checkpoint"""
    PRESETS: ClassVar[dict] = {"tiny": {"steps": 2, "lr": 1}}


def test_defaults_preset_then_flags():
    """A preset overrides defaults and flags override the preset, each converted to the field's type."""
    cfg = parse_config(Cfg, ["--preset=tiny", "--lr=0.5", "--fused=true", "--init=a.pt"])
    assert (cfg.lr, cfg.steps, cfg.fused, cfg.init) == (0.5, 2, True, "a.pt")
    assert isinstance(parse_config(Cfg, ["--preset=tiny"]).lr, float)
    assert parse_config(Cfg, ["--init=none"]).init is None


def test_unknown_flag_lists_valid_names():
    """An unknown flag is rejected with a message listing the valid names."""
    with pytest.raises(ConfigError) as e:
        parse_config(Cfg, ["--learning_rate=1"])
    assert "learning_rate" in str(e.value) and "lr" in str(e.value) and "steps" in str(e.value)


@pytest.mark.parametrize("arg", ["--steps=1.5", "--lr=fast", "--fused=maybe", "steps=3", "--preset=huge"])
def test_ill_typed_or_malformed_flags_rejected(arg):
    """Ill-typed values, flags without -- or =, and unknown presets raise ConfigError."""
    with pytest.raises(ConfigError):
        parse_config(Cfg, [arg])


def test_field_docs_are_the_help_lines():
    """Each field's following string literal is its help text."""
    assert field_docs(Cfg)["lr"] == "peak learning rate"


def test_hash_and_diff():
    """The hash ignores key order; the diff names exactly the fields that differ."""
    a, b = {"x": 1, "y": 2}, {"y": 2, "x": 1}
    assert config_hash(a) == config_hash(b)
    assert config_diff({"x": 1, "y": 2}, {"x": 1, "y": 3}) == ["y: 2 -> 3"]
    assert config_diff({"x": 1, "y": 2}, {"x": 1, "y": 3}, ignore=("y",)) == []


@dataclass(frozen=True)
class LibHP:
    beta: float = 0.02
    """KL coefficient"""
    clip: float = 0.2
    """ratio clip"""


@dataclass
class Script:
    steps: int = 10
    """optimisation steps"""
    hp: LibHP = field(default_factory=lambda: LibHP(clip=0.3))
    """the library's hyperparameters"""
    PRESETS: ClassVar[dict] = {"tiny": {"steps": 2, "beta": 0.5}}


def test_nested_hyperparameters_are_flat_flags():
    """A library dataclass inside a script's Config: its fields are top-level flags (presets too), the container's
    default instance gives the defaults, config_dict is flat, and --help shows the library's field docs."""
    cfg = parse_config(Script, ["--preset=tiny", "--clip=0.1"])
    assert (cfg.steps, cfg.hp) == (2, LibHP(beta=0.5, clip=0.1))
    assert parse_config(Script, []).hp == LibHP(clip=0.3)
    assert config_dict(cfg) == {"steps": 2, "beta": 0.5, "clip": 0.1}
    assert default_dict(Script) == {"steps": 10, "beta": 0.02, "clip": 0.3}
    assert "--beta=0.02 (float)  KL coefficient" in usage(Script)
    with pytest.raises(ConfigError, match="unknown flag --hp"):
        parse_config(Script, ["--hp=1"])


def test_a_flag_declared_twice_is_refused():
    """A nested field that shadows a top-level one would make one flag set two things: refused."""
    @dataclass
    class Clash:
        beta: float = 1.0
        hp: LibHP = field(default_factory=LibHP)

    with pytest.raises(ConfigError, match="--beta is declared twice"):
        parse_config(Clash, [])


def test_per_size_values_map_each_size_and_refuse_gaps():
    """A per-size flag gives each model size its own value (or one bare value to all), and refuses a spec that
    misses a size, names an unknown one, or holds a value out of range, naming the flag."""
    assert per_size("1m:6,100k:16", ["1m", "100k"], "sft_epochs", int) == {"1m": 6, "100k": 16}
    assert per_size("0.2", ["1m", "100k"], "sft_dropout", positive=False) == {"1m": 0.2, "100k": 0.2}
    assert per_size("1m:1,100k:0", ["1m", "100k"], "ptx_coef", positive=False)["100k"] == 0
    for spec, kw in (("1m:6", {}), ("1m:6,100k:6,10m:6", {}), ("1m:6,100k:6,7", {}), ("1m:6,100k:x", {}),
                     ("1m:6,100k:0", {}),
                     ("1m:1,100k:-1", {"positive": False}), ("nan", {})):
        with pytest.raises(ConfigError, match="--flag="):
            per_size(spec, ["1m", "100k"], "flag", **kw)


def test_flags_in_either_style_and_bare_booleans():
    """`--name value` reads as `--name=value` (the preset too), a bare boolean flag is true, `--flag false` reads,
    and a negative number is a value, not a flag."""
    spaced = parse_config(Cfg, ["--preset", "tiny", "--lr", "-0.5", "--fused", "--init", "a.pt"])
    assert spaced == parse_config(Cfg, ["--preset=tiny", "--lr=-0.5", "--fused=true", "--init=a.pt"])
    assert parse_config(Cfg, ["--fused", "--steps", "3"]).fused is True
    assert parse_config(Cfg, ["--fused", "false", "--steps", "3"]) == parse_config(Cfg, ["--steps=3"])


@pytest.mark.parametrize("argv, message", [
    (["--lr"], "--lr needs a value"),
    (["--steps", "--lr=1"], "--steps needs a value"),
    (["--preset"], "--preset needs a value"),
    (["--fused", "maybe"], "expected --name=value or --name value, got 'maybe'"),
    (["--stepz", "3"], "did you mean --steps?"),
])
def test_flag_errors_never_suggest_the_flag_just_typed(argv, message):
    """A flag without its value says so, a stray word is named, and no hint offers back the name that was typed."""
    with pytest.raises(ConfigError) as e:
        parse_config(Cfg, argv)
    assert message in str(e.value)
    typed = {a.split("=")[0] for a in argv if a.startswith("--")}
    assert not any(f"did you mean {t}?" in str(e.value) for t in typed)
