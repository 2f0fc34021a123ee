"""Config parsing: typed --name=value flags, presets, clear errors (issue 2 item 6)."""
from dataclasses import dataclass
from typing import ClassVar

import pytest

from nanorlhf.config import ConfigError, config_diff, config_hash, field_docs, parse_config


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
