"""Settings that change how stenograph captures and guards.

Read them as `stenograph.config.recompile_limit`; change them by assignment or, scoped, with
`config.patch(recompile_limit=2)` as a context manager or decorator. Every name torch 2.13's
`torch._dynamo.config` has is accepted, so code written for torch.compile runs unchanged: those
with an equivalent here behave as torch's (`error_on_recompile`, `cache_size_limit`,
`suppress_errors`, ...), the others are kept but have no effect (docs/supported.md says, for each,
what stenograph does). Names in neither (typos) and values of the wrong type raise `InvalidConfig`.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import os
import sys
import types
from typing import Any

from .errors import InvalidConfig

# settings taking a fixed set of values of mixed types (checked by identity for bools and None)
_CHOICES: dict[str, tuple[Any, ...]] = {
    "native_guards": ("auto", None, True, False),
    # torch's: True or "ddp_optimizer" split at DDP's buckets, False or "no_optimization" do not
    "optimize_ddp": (True, False, "ddp_optimizer", "no_optimization"),
    "automatic_dynamic_shapes_mark_as": ("dynamic", "unbacked"),
    "side_effect_replay_policy": ("info", "silent", "warn", "error"),
}
# torch's spellings of a choice, stored as the value stenograph reads
_CANONICAL_CHOICE: dict[tuple[str, Any], Any] = {
    ("optimize_ddp", "ddp_optimizer"): True,
    ("optimize_ddp", "no_optimization"): False,
}
# settings taking values of several types
_TYPES: dict[str, tuple[type, ...]] = {"cprofile": (bool, str), "dynamo_profiler": (bool, str)}
_NO_COMPILED_AUTOGRAD = "stenograph has no compiled autograd (backward passes run in the eager autograd engine)"
# torch's values that ask for what stenograph does not do: refused, not ignored
_NOT_SUPPORTED: dict[tuple[str, Any], str] = {
    ("compiled_autograd", True): _NO_COMPILED_AUTOGRAD,
    ("optimize_ddp", "python_reducer"): f"the Python reducer needs compiled autograd; {_NO_COMPILED_AUTOGRAD}",
    ("optimize_ddp", "python_reducer_without_compiled_forward"): (
        f"the Python reducer needs compiled autograd; {_NO_COMPILED_AUTOGRAD}"
    ),
}

# STENOGRAPH_NATIVE_GUARDS=auto|1|0 sets the default of `native_guards`
_NATIVE_ENV = "STENOGRAPH_NATIVE_GUARDS"
_NATIVE_ENV_VALUES = {"": "auto", "auto": "auto", "1": True, "true": True, "0": False, "false": False}


def _native_guards_default() -> Any:
    text = os.environ.get(_NATIVE_ENV, "").strip().lower()
    if text not in _NATIVE_ENV_VALUES:
        raise InvalidConfig(f"{_NATIVE_ENV}={text!r}: expected auto, 1 or 0")
    return _NATIVE_ENV_VALUES[text]


_DEFAULTS: dict[str, Any] = {
    # compiles per code object before the frame runs eagerly for good (one warning); a
    # compile(recompile_limit=...) call sets its own (regions.py)
    "recompile_limit": 8,
    # entries of one code object in all its caches together (every backend, every
    # compile(isolate_recompiles=True) call) before a new one is refused as recompile_limit's are
    "accumulated_recompile_limit": 256,
    # print internal stacks with warnings and logs
    "verbose": False,
    # run eager beside each newly compiled graph once and raise if results differ
    "verify_correctness": False,
    # sizes and ints are static until they change (then automatic dynamic applies)
    "assume_static_by_default": True,
    # a size or int that changes between calls becomes symbolic on recompile
    "automatic_dynamic_shapes": True,
    # ints / floats are always constants (one compile per value), never symbolic: off by default,
    # as torch.compile's settings of the same names, so a number that changes goes dynamic
    "specialize_int": False,
    "specialize_float": False,
    # mutations of Python objects made while tracing are replayed after the graph runs
    "replay_side_effects": True,
    # an internal failure while compiling a frame runs it eagerly instead of raising (torch's
    # default is False; stenograph's keeps a model running where its tracer falls short)
    "suppress_errors": True,
    # Tensor.item() becomes a graph value instead of a graph break
    "capture_scalar_outputs": False,
    # ops whose output size depends on tensor data (nonzero, x[mask], unique, masked_select) are
    # recorded with an unbacked size instead of breaking the graph
    "capture_dynamic_output_shape_ops": False,
    # a graph compiled inside a DistributedDataParallel forward is split at DDP's gradient buckets,
    # each piece compiled on its own so all-reduces overlap the backward (torch.compile's setting
    # of the same name; backends/ddp_split.py)
    "optimize_ddp": True,
    # deepest inlining of user calls before the call runs as an opaque eager call
    "inline_depth_limit": 64,
    # benchmark switches, off only to measure what they are worth:
    # Inductor is told which graph inputs are parameters/buffers (static for CUDA graphs)
    "mark_static_inputs": True,
    # entries compiled for CUDA graphs advance the CUDA-graph trees' call counter per call
    # (benchmarks/cudagraph_loops.py)
    "cudagraph_call_marks": True,
    # graphs that compute no gradients, compiled by Inductor in a CUDA-graph mode, are replayed by
    # stenograph's own CUDA graphs with their outputs copied out, not by Inductor's cudagraph trees
    # (backends/cuda_graph_runner.py; benchmarks/generate.py)
    "cuda_graphs_for_inference": True,
    # guard functions call native (C++) checks for tensors and modules, built on first need
    # (guards/native.py): "auto" (or None) when they build, False never, True always (raises
    # NativeGuardsUnavailable when they cannot be built); applies to guards built afterwards
    "native_guards": _native_guards_default(),
    # torch's switches with an effect here, as in torch.compile (torch's behaviour is the contract):
    # a recompile (a call no entry accepts, of a function that has entries) raises RecompileError
    "error_on_recompile": False,
    # the call that hits recompile_limit raises FailOnRecompileLimitHit (later ones run eagerly)
    "fail_on_recompile_limit_hit": False,
    # `with optimize(...):` raises RuntimeError (else NotImplementedError: see api.optimize)
    "raise_on_ctx_manager_usage": True,
    # a miss runs the function eagerly, compiling nothing (cached code still runs), as torch's
    "disable": False,
    # an nn.Parameter's sizes are static wherever it is passed from; False lets automatic dynamic
    # shapes make them symbolic as other inputs' (a module's own parameters and buffers stay static)
    "force_parameter_static_shapes": True,
    # an int attribute of an nn.Module (`self.step`) that changed between calls is symbolic from
    # the next compile on (automatic dynamic); False: such ints are constants, a new value
    # compiles again
    "allow_unspec_int_on_nn_module": False,
    # a folder where compiled entries persist, so a later process (or another machine, through
    # save_artifacts/load_artifacts) runs them without compiling (warm/); None: off.
    # STENOGRAPH_CACHE_DIR sets the default
    "cache_dir": os.environ.get("STENOGRAPH_CACHE_DIR") or None,
}

# settings that take a string or None
_OPTIONAL_TEXT = frozenset({"cache_dir"})

# torch._dynamo.config's other settings, with torch 2.13's defaults: accepted and kept so code
# written for torch runs unchanged, but nothing in stenograph reads them (docs/supported.md says
# what stenograph does instead of each). Values are checked against the default's type; a None
# default takes anything.
_TORCH_ONLY: dict[str, Any] = {
    # recompiling
    "skip_code_recursive_on_recompile_limit_hit": True,
    "automatic_dynamic_exclusion_guard": False,
    "automatic_dynamic_local_pgo": True,
    "automatic_dynamic_remote_pgo": None,
    # shapes and specialisation
    "automatic_dynamic_shapes_mark_as": "dynamic",
    "force_nn_module_property_static_shapes": True,
    "allow_ignore_mark_dynamic": False,
    "dynamic_shapes": True,
    "prefer_deferred_runtime_asserts_over_guards": False,
    "do_not_emit_runtime_asserts": False,
    "force_unspec_int_unbacked_size_like_on_torchrec_kjt": False,
    # guards: torch's ways of skipping or speeding up checks (stenograph makes them all)
    "guard_nn_modules": True,
    "guard_nn_modules_using_dict_tags": True,
    "skip_fsdp_guards": True,
    "skip_nnmodule_hook_guards": True,
    "skip_no_tensor_aliasing_guards_on_parameters": True,
    "skip_tensor_guards_with_matching_dict_tags": True,
    "skip_guards_on_constant_func_defaults": False,
    "assume_dunder_attributes_remain_unchanged": True,
    "use_recursive_dict_tags_for_guards": False,
    "max_saved_pointers_for_recursive_dict_tags_check": 256,
    "use_lamba_guard_for_object_aliasing": True,
    "enable_cpp_guard_manager": True,
    "enable_cpp_symbolic_shape_guards": False,
    "enable_cpp_framelocals_guard_eval": True,
    # what is traced
    "inline_inbuilt_nn_modules": True,
    "traceable_tensor_subclasses": set(),
    "nontraceable_tensor_subclasses": set(),
    "capture_autograd_function": True,
    "capture_func_transforms": True,
    "capture_sparse_compute": True,
    "capture_profiler_record_function": False,
    "constant_fold_autograd_profiler_enabled": False,
    "trace_numpy": True,
    "numpy_default_float": "float64",
    "numpy_default_complex": "complex128",
    "numpy_default_int": "int64",
    # NumPy's random draws run eagerly (NumPy's numbers); False draws them from torch's generator
    # in the graph, as torch.compile's default does
    "use_numpy_random_stream": True,
    "trace_autograd_ops": False,
    "allow_rnn": False,
    "rewrite_assert_with_torch_assert": True,
    "enable_trace_contextlib": True,
    "enable_trace_unittest": False,
    "enable_trace_load_build_class": False,
    "enable_faithful_generator_behavior": True,
    # a break inside inlined calls resumes each caller after its call (one graph before, one
    # after) instead of splitting the callers at their calls (`frame_compiler._nested_breaks`)
    "nested_graph_breaks": False,
    "dont_skip_tracing": False,
    "skip_torchrec": True,
    "allowed_functions_module_string_ignorelist": {
        "torch.distributions",
        "torch.testing",
        "torch._refs",
        "torch._prims",
        "torch._decomp",
    },
    "skipfiles_inline_module_allowlist": {},
    "only_allow_pt2_compliant_ops": False,
    "reorderable_logging_functions": set(),
    "ignore_logging_functions": set(),
    "graph_break_on_nn_param_ctor": True,
    "enable_dynamo_decompositions": True,
    "inline_torch_dispatch_torch_compile": True,
    "skip_fwd_side_effects_in_bwd_under_checkpoint": False,
    "side_effect_replay_policy": "info",
    "allow_empty_graphs": False,
    "install_free_tensors": False,
    "install_free_tensors_for_export": True,
    "wrap_top_frame": False,
    "error_on_dynamo_callback_in_fullgraph_compiled_code": False,
    "error_on_nested_fx_trace": True,
    "error_on_nested_jit_trace": True,
    "force_compile_during_fx_trace": False,
    # graph regions and deduplication
    "use_graph_deduplication": False,
    "track_nodes_for_deduplication": False,
    "graph_deduplication_lint": False,
    "enable_invoke_subgraph_regional_compile": False,
    "inline_invoke_subgraph": False,
    "inline_single_use_invoke_subgraph": True,
    # backends, autograd, distributed
    "compiled_autograd": False,
    "compiled_autograd_kwargs_override": {},
    "prepare_freezing": False,
    "raise_on_unsafe_aot_autograd": False,
    "cudagraph_backend_keep_input_mutation": False,
    "cudagraph_backend_support_input_mutation": False,
    "optimize_ddp_lazy_compile": False,
    "enable_compiler_collectives": False,
    "enable_p2p_compilation": False,
    "use_lazy_graph_module": True,
    "invalidate_compile_context_weakrefs": None,
    # caching, precompile, fake tensors
    "caching_precompile": False,
    "strict_precompile": False,
    "enable_aot_compile": True,
    "fake_tensor_cache_enabled": True,
    "fake_tensor_cache_crosscheck_enabled": False,
    "fake_tensor_disable_inference_mode": True,
    "run_gc_after_compile": True,
    # logging, profiling, debugging, the minifier
    "log_file_name": None,
    "log_compilation_metrics": True,
    "log_graph_in_out_metadata": False,
    "generate_pycode": False,
    "cprofile": False,
    "dynamo_profiler": False,
    "record_compile_time_instruction_count": False,
    "record_runtime_overhead": True,
    "pt2_compile_id_prefix": None,
    "report_guard_failures": True,
    "replay_record_enabled": False,
    "repro_after": None,
    "repro_level": 2,
    "repro_forward_only": False,
    "repro_tolerance": 1e-3,
    "repro_ignore_non_fp": False,
    "same_two_models_use_fp64": True,
    "base_dir": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "debug_dir_root": os.path.join(os.getcwd(), "torch_compile_debug"),
    "debug_backend_override": "",
    "debug_inductor_config_override": "",
    "debug_dynamo_config_override": "",
    "leaf_function_validate_outputs": False,
    "leaf_function_check_escaped_gradients": False,
    "issue_3_13_0_warning": True,
    # torch's own test switches
    "debug_disable_compile_counter": False,
    "debug_force_nested_calls": False,
    "debug_force_graph_break_on_leaf_return": False,
    "inject_BUILD_SET_unimplemented_TESTING_ONLY": False,
    # deprecated in torch, without effect there either
    "minimum_call_count": 1,
    "dead_code_elimination": None,
}
_SETTINGS: dict[str, Any] = {**_DEFAULTS, **_TORCH_ONLY}

# torch's other names of settings
_ALIASES = {
    "cache_size_limit": "recompile_limit",
    "accumulated_cache_size_limit": "accumulated_recompile_limit",
    "fail_on_cache_limit_hit": "fail_on_recompile_limit_hit",
    "skip_code_recursive_on_cache_limit_hit": "skip_code_recursive_on_recompile_limit_hit",
    "ignore_logger_methods": "ignore_logging_functions",
}

# settings that do not change what a compile makes (left out of `get_hash()`): torch's list
# (its `_compile_ignored_keys`) for its names, and stenograph's guard implementation
_COMPILE_IGNORED = frozenset(
    {
        "recompile_limit",
        "accumulated_recompile_limit",
        "error_on_recompile",
        "fail_on_recompile_limit_hit",
        "verbose",
        "verify_correctness",
        "native_guards",
        "log_file_name",
        "cprofile",
        "dynamo_profiler",
        "generate_pycode",
        "report_guard_failures",
        "replay_record_enabled",
        "repro_after",
        "repro_level",
        "repro_forward_only",
        "repro_tolerance",
        "repro_ignore_non_fp",
        "same_two_models_use_fp64",
        "base_dir",
        "debug_dir_root",
        "debug_backend_override",
        "debug_inductor_config_override",
        "debug_dynamo_config_override",
        "leaf_function_validate_outputs",
        "leaf_function_check_escaped_gradients",
    }
)


def _check(name: str, key: str, value: Any) -> Any:
    """`value` as stored for setting `key` (written as `name`), or InvalidConfig saying why not."""
    refused = _NOT_SUPPORTED.get((key, value)) if isinstance(value, (bool, str)) else None
    if refused is not None:
        raise InvalidConfig(f"stenograph.config.{name}={value!r} is not supported: {refused}")
    if key in _CHOICES:
        if not any(value is c or (type(value) is str and value == c) for c in _CHOICES[key]):
            choices = ", ".join(repr(c) for c in _CHOICES[key])
            raise InvalidConfig(f"stenograph.config.{name} must be one of {choices}, got {value!r}")
        return _CANONICAL_CHOICE.get((key, value), value) if isinstance(value, str) else value
    if key in _OPTIONAL_TEXT:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if value is not None and type(value) is not str:
            raise InvalidConfig(f"stenograph.config.{name} must be a str, a path or None, got {type(value).__name__}")
        return value
    default = _SETTINGS[key]
    expected = _TYPES.get(key, (type(default),))
    fits = (
        default is None
        or type(value) in expected
        or (float in expected and type(value) is int)
        # a container setting takes a subclass (an OrderedDict for a dict)
        or (isinstance(default, (set, dict)) and isinstance(value, expected))
    )
    if not fits:
        names = " or ".join(t.__name__ for t in expected)
        raise InvalidConfig(f"stenograph.config.{name} must be {names}, got {type(value).__name__} ({value!r})")
    if type(value) is int and value < 0 and key in _DEFAULTS:
        raise InvalidConfig(f"stenograph.config.{name} must be >= 0, got {value}")
    return value


def _stable_repr(value: Any) -> str:
    """`repr` that does not depend on a set's iteration order (for `get_hash`)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{_stable_repr(k)}: {_stable_repr(v)}" for k, v in value.items())) + "}"
    return repr(value)


class _Config(types.ModuleType):
    """Module subclass so `config.x = v` is validated while `import config` keeps working.

    Each setting (and each alias) is an entry of the module's `__dict__`, as in a plain module:
    reads cost one attribute lookup, `dir(config)` lists them, and `unittest.mock.patch.object`
    finds them there and restores them by assignment (it deletes what it found elsewhere).
    """

    def _canonical(self, name: str) -> str:
        key = _ALIASES.get(name, name)
        if key not in _SETTINGS:
            close = difflib.get_close_matches(name, [*_SETTINGS, *_ALIASES], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidConfig(
                f"stenograph.config has no setting {name!r}{hint} (it takes stenograph's settings and every one "
                "of torch._dynamo.config's; docs/supported.md lists them)"
            )
        return key

    def __getattr__(self, name: str) -> Any:
        # reached only for names missing from `__dict__`: never a setting
        if name.startswith("__"):
            raise AttributeError(name)
        return self.__dict__[self._canonical(name)]

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") and name not in _ALIASES:
            super().__setattr__(name, value)
            return
        key = self._canonical(name)
        self._store(key, _check(name, key, value))

    def __delattr__(self, name: str) -> None:
        """`del config.x` restores the default (pytest's monkeypatch undoes a patch this way)."""
        if name.startswith("_") and name not in _ALIASES:
            super().__delattr__(name)
            return
        key = self._canonical(name)
        self._store(key, copy.copy(_SETTINGS[key]))  # a fresh set or dict: the default stays as it was

    def __dir__(self) -> list[str]:
        methods = {"patch", "to_dict", "get_config_copy", "get_hash"}
        return sorted(set(super().__dir__()) | set(_SETTINGS) | set(_ALIASES) | methods)

    def _store(self, key: str, value: Any) -> None:
        """Set a setting and the aliases that name it."""
        self.__dict__[key] = value
        for alias, target in _ALIASES.items():
            if target == key:
                self.__dict__[alias] = value

    def patch(self, name_or_changes: str | dict | None = None, value: Any = None, /, **changes: Any) -> Any:
        """Change settings for a `with` block or a decorated function, then restore them.

        As torch's config modules: `patch(x=1)`, `patch("x", 1)` or `patch({"x": 1})`."""
        if isinstance(name_or_changes, str):
            changes = {name_or_changes: value, **changes}
        elif isinstance(name_or_changes, dict):
            changes = {**name_or_changes, **changes}
        elif name_or_changes is not None:
            raise InvalidConfig(f"config.patch() takes a setting's name or a dict, not {name_or_changes!r}")
        for name in changes:
            self._canonical(name)
        return _Patch(self, changes)

    def to_dict(self) -> dict[str, Any]:
        """The current value of every setting (aliases not repeated)."""
        return {key: self.__dict__[key] for key in _SETTINGS}

    def get_config_copy(self) -> dict[str, Any]:
        """torch's config modules' name for `to_dict()`."""
        return self.to_dict()

    def get_hash(self) -> bytes:
        """A digest of the settings that change what a compile makes (those not in
        `_compile_ignored_keys`), as torch's config modules give one: equal settings, equal hash."""
        state = sorted((k, _stable_repr(v)) for k, v in self.to_dict().items() if k not in _COMPILE_IGNORED)
        return hashlib.md5(repr(state).encode(), usedforsecurity=False).digest()


class _Patch(contextlib.ContextDecorator):
    def __init__(self, cfg: _Config, changes: dict[str, Any]) -> None:
        self._cfg = cfg
        self._changes = changes
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> _Patch:
        self._saved.append(self._cfg.to_dict())
        for name, value in self._changes.items():
            setattr(self._cfg, name, value)
        return self

    def __exit__(self, *exc: object) -> None:
        for key, value in self._saved.pop().items():
            self._cfg._store(key, value)

    def __call__(self, target: Any) -> Any:
        """A decorated function runs with the settings; a decorated test class (a
        `unittest.TestCase`) has them from each test's `setUp` to its `tearDown`, as torch's
        config modules patch a class."""
        if not isinstance(target, type):
            return super().__call__(target)
        if not (callable(getattr(target, "setUp", None)) and callable(getattr(target, "tearDown", None))):
            raise InvalidConfig(
                f"config.patch() decorates functions and test classes (with setUp/tearDown), not {target!r}"
            )
        set_up, tear_down = target.setUp, target.tearDown
        patch = self

        def setUp(self: Any) -> None:  # noqa: N802 - unittest's name
            patch.__enter__()
            try:
                set_up(self)
            except BaseException:
                patch.__exit__()
                raise

        def tearDown(self: Any) -> None:  # noqa: N802 - unittest's name
            try:
                tear_down(self)
            finally:
                patch.__exit__()

        target.setUp, target.tearDown = setUp, tearDown
        return target


_module = sys.modules[__name__]
_config = _Config(__name__, __doc__)
_config.__dict__.update({k: v for k, v in _module.__dict__.items() if k in ("__file__", "__spec__", "__loader__")})
for _key, _value in _SETTINGS.items():
    _config._store(_key, copy.copy(_value))
# torch's name: the settings `get_hash()` leaves out, aliases included
_config._compile_ignored_keys = _COMPILE_IGNORED | {a for a, key in _ALIASES.items() if key in _COMPILE_IGNORED}
sys.modules[__name__] = _config
