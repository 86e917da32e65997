"""`stenograph.config` behaves like torch's config modules: listed by `dir`, patched and restored
by `unittest.mock.patch.object` and pytest's monkeypatch, validated on every write."""

from __future__ import annotations

import pickle
from unittest import mock

import pytest
import torch

import stenograph
from stenograph.errors import InvalidConfig

config = stenograph.config


def test_dir_lists_every_setting_and_alias():
    listed = dir(config)
    for name in config.to_dict():
        assert name in listed, name
    assert "cache_size_limit" in listed
    assert "patch" in listed


def test_mock_patch_object_restores_a_non_default_value():
    """The conftest runs every test with suppress_errors=False (not the default): mock's restore
    must bring back that value, not the default."""
    assert config.suppress_errors is False
    with mock.patch.object(config, "suppress_errors", True):
        assert config.suppress_errors is True
    assert config.suppress_errors is False


def test_mock_patch_object_as_decorator_and_through_an_alias():
    config.recompile_limit = 5
    try:

        @mock.patch.object(config, "cache_size_limit", 2)
        def read():
            return config.recompile_limit, config.cache_size_limit

        assert read() == (2, 2)
        assert (config.recompile_limit, config.cache_size_limit) == (5, 5)
        with mock.patch.object(config, "recompile_limit", 3):
            assert config.cache_size_limit == 3
        assert config.cache_size_limit == 5
    finally:
        del config.recompile_limit
    assert config.recompile_limit == 8


def test_mock_patch_dict_style_multiple_and_nested():
    with mock.patch.multiple(config, verbose=True, inline_depth_limit=3):
        assert config.verbose is True and config.inline_depth_limit == 3
        with config.patch(inline_depth_limit=4):
            assert config.inline_depth_limit == 4
        assert config.inline_depth_limit == 3
    assert config.verbose is False and config.inline_depth_limit == 64


def test_monkeypatch_restores_the_previous_value(monkeypatch):
    config.recompile_limit = 6
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(config, "recompile_limit", 1)
            assert config.recompile_limit == 1
        assert config.recompile_limit == 6
    finally:
        del config.recompile_limit


def test_patched_setting_takes_effect_while_compiling(cnt):
    """A mock-patched recompile limit is the one the entry wrapper obeys."""

    def f(x, n):
        return x + n

    compiled = stenograph.compile(f, backend=cnt, dynamic=False)
    x = torch.randn(2)
    with mock.patch.object(config, "recompile_limit", 1):
        with pytest.warns(stenograph.StenographWarning, match="recompile_limit"):
            for n in range(3):
                torch.testing.assert_close(compiled(x, n), f(x, n))
    assert cnt.frame_count == 1


def test_unknown_names_and_wrong_types_still_raise():
    with pytest.raises(AttributeError, match="no_such"):
        with mock.patch.object(config, "no_such", 1):
            pass
    with pytest.raises(InvalidConfig, match="must be int"):
        with mock.patch.object(config, "recompile_limit", "8"):
            pass
    assert config.recompile_limit == 8
    with pytest.raises(InvalidConfig):
        config.no_such = 1
    assert "no_such" not in dir(config)


def test_to_dict_round_trips_through_pickle():
    saved = pickle.loads(pickle.dumps(config.to_dict()))
    assert saved == config.to_dict()
    assert "cache_size_limit" not in saved


def test_patch_takes_torch_config_forms():
    with config.patch("recompile_limit", 2):
        assert config.recompile_limit == 2
    with config.patch({"verbose": True, "cache_size_limit": 3}):
        assert config.verbose is True and config.recompile_limit == 3
    assert config.recompile_limit == 8 and config.verbose is False
    with pytest.raises(InvalidConfig, match="no setting 'nope'"):
        config.patch("nope", 1)
    with pytest.raises(InvalidConfig, match="a setting's name or a dict"):
        config.patch(3)
    assert config.get_config_copy() == config.to_dict()
