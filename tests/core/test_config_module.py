"""`stenograph.config` behaves like torch's config modules: listed by `dir`, patched and restored
by `unittest.mock.patch.object` and pytest's monkeypatch, validated on every write."""

from __future__ import annotations

import os
import pickle
import types
import warnings
from unittest import mock

import pytest
import torch

import stenograph
from stenograph.errors import FailOnRecompileLimitHit, InvalidConfig

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


# ---------------------------------------------------------------------------------------------
# torch._dynamo.config's names (torch 2.13's config is the contract)


def _torch_config() -> types.ModuleType:
    import torch._dynamo.config as torch_config  # the reference: torch's own config module

    return torch_config


@pytest.mark.skipif(not torch.__version__.startswith("2.13"), reason="the table is torch 2.13's")
def test_every_torch_setting_is_accepted_with_torchs_default():
    torch_config = _torch_config()
    names = [n for n in torch_config.get_config_copy() if not n.startswith("_") and n != "TYPE_CHECKING"]
    aliases = ["cache_size_limit", "accumulated_cache_size_limit", "fail_on_cache_limit_hit", "ignore_logger_methods"]
    assert not [n for n in names + aliases if n not in dir(config)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's deprecated settings warn when read
        differ = {n for n in names if getattr(config, n) != getattr(torch_config, n)}
    # documented: stenograph's own (NumPy's random draws run eagerly, so they are NumPy's numbers)
    assert differ <= {"suppress_errors", "base_dir", "debug_dir_root", "use_numpy_random_stream"}


def test_torch_only_settings_are_kept_patched_and_restored():
    with config.patch(guard_nn_modules=False, automatic_dynamic_shapes_mark_as="unbacked", repro_after="dynamo"):
        assert (config.guard_nn_modules, config.automatic_dynamic_shapes_mark_as) == (False, "unbacked")
        assert config.repro_after == "dynamo"  # a None default takes anything
    assert (config.guard_nn_modules, config.repro_after) == (True, None)
    with mock.patch.object(config, "accumulated_cache_size_limit", 3):
        assert config.accumulated_recompile_limit == 3
    assert config.accumulated_recompile_limit == 256
    assert "guard_nn_modules" in config.to_dict()


def test_torch_settings_are_type_checked():
    with pytest.raises(InvalidConfig, match="must be bool"):
        config.guard_nn_modules = "yes"
    with pytest.raises(InvalidConfig, match="must be one of 'dynamic', 'unbacked'"):
        config.automatic_dynamic_shapes_mark_as = "oblivious"
    config.cprofile = "stats.prof"  # torch's bool-or-path settings
    del config.cprofile
    with pytest.raises(InvalidConfig, match="must be bool or str"):
        config.cprofile = 1


def test_a_set_setting_is_mutated_in_place_and_restored_fresh():
    """`traceable_tensor_subclasses` is a set users add classes to (a no-op in torch 2.13 too)."""

    class Sub(torch.Tensor):
        pass

    config.traceable_tensor_subclasses.add(Sub)
    assert Sub in config.traceable_tensor_subclasses
    with config.patch(traceable_tensor_subclasses={int}):
        assert config.traceable_tensor_subclasses == {int}
    assert Sub in config.traceable_tensor_subclasses
    del config.traceable_tensor_subclasses
    assert config.traceable_tensor_subclasses == set()


def test_typos_name_the_closest_setting():
    with pytest.raises(InvalidConfig, match="no setting 'recompile_limt'; did you mean 'recompile_limit'"):
        config.recompile_limt = 2
    with pytest.raises(InvalidConfig, match="did you mean 'guard_nn_modules'"):
        config.patch(guard_nn_module=True)


def test_torch_values_asking_for_what_stenograph_lacks_are_refused():
    with pytest.raises(InvalidConfig, match="no compiled autograd"):
        config.compiled_autograd = True
    with pytest.raises(InvalidConfig, match="Python reducer needs compiled autograd"):
        config.optimize_ddp = "python_reducer"
    assert config.compiled_autograd is False and config.optimize_ddp is True


def test_optimize_ddp_takes_torchs_mode_names():
    with config.patch(optimize_ddp="no_optimization"):
        assert config.optimize_ddp is False
    with config.patch(optimize_ddp="ddp_optimizer"):
        assert config.optimize_ddp is True


def test_get_hash_follows_settings_that_change_compiles():
    """As torch's config modules: ignored keys (verbose) leave the hash alone, others change it,
    nested patches restore it."""
    start = config.get_hash()
    assert isinstance(start, bytes)
    with config.patch(verbose=True, recompile_limit=2, cache_size_limit=2):
        assert config.get_hash() == start
    with config.patch(dead_code_elimination=True):
        changed = config.get_hash()
        assert changed != start
        with config.patch(verbose=True):
            assert config.get_hash() == changed
    assert config.get_hash() == start
    assert {"verbose", "recompile_limit", "cache_size_limit", "error_on_recompile"} <= config._compile_ignored_keys
    assert "dead_code_elimination" not in config._compile_ignored_keys


def test_error_on_recompile_raises_on_a_recompile_only(cnt):
    """torch's `error_on_recompile`: the first compile is allowed, a second one raises."""
    compiled = stenograph.compile(lambda x: x + 1, backend=cnt, dynamic=False)
    with config.patch(error_on_recompile=True):
        compiled(torch.ones(2))
        compiled(torch.ones(2))
        with pytest.raises(stenograph.RecompileError, match=r"error_on_recompile.*size=\[2\]"):
            compiled(torch.ones(3))
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(torch.ones(3)), torch.full((3,), 2.0))
    assert cnt.frame_count == 2


def test_fail_on_recompile_limit_hit_raises_at_the_limit(cnt):
    compiled = stenograph.compile(lambda x: x + 1, backend=cnt, dynamic=False)
    with config.patch(fail_on_cache_limit_hit=True, recompile_limit=2):
        compiled(torch.ones(1))
        compiled(torch.ones(2))
        with pytest.raises(FailOnRecompileLimitHit, match=r"recompile limit \(2\)"):
            compiled(torch.ones(3))
    assert cnt.frame_count == 2


def test_disable_compiles_nothing_new_but_runs_cached_code(cnt):
    compiled = stenograph.compile(lambda x: x * 2, backend=cnt, dynamic=False)
    compiled(torch.ones(2))
    with config.patch(disable=True):
        torch.testing.assert_close(compiled(torch.ones(3)), torch.full((3,), 2.0))
        compiled(torch.ones(2))
    assert cnt.frame_count == 1
    compiled(torch.ones(3))
    assert cnt.frame_count == 2


def test_patch_decorates_a_test_class_for_each_test():
    """`@config.patch(...)` on a `unittest.TestCase`: the settings hold from each test's setUp to
    its tearDown (torch's config modules patch a class so), and only then."""
    import unittest

    seen = []

    @stenograph.config.patch(capture_scalar_outputs=True)
    class Case(unittest.TestCase):
        def setUp(self):
            seen.append(("setUp", stenograph.config.capture_scalar_outputs))

        def test_it(self):
            seen.append(("test", stenograph.config.capture_scalar_outputs))

    assert isinstance(Case, type) and issubclass(Case, unittest.TestCase)
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet).run(unittest.defaultTestLoader.loadTestsFromTestCase(Case))
    assert result.wasSuccessful()
    assert seen == [("setUp", True), ("test", True)]
    assert stenograph.config.capture_scalar_outputs is False
    with pytest.raises(InvalidConfig, match="decorates functions and test classes"):
        stenograph.config.patch(capture_scalar_outputs=True)(int)
