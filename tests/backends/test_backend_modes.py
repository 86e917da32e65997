"""`mode=` / `options=` -> Inductor config patches, and their error messages."""

from __future__ import annotations

import pytest

from stenograph.backends import inductor_backend, resolve_mode, valid_modes
from stenograph.errors import InvalidBackend

REQUIRED_MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


@pytest.mark.parametrize(
    ("mode", "patches"),
    [
        (None, {}),
        ("default", {}),
        ("reduce-overhead", {"triton.cudagraphs": True}),
        (
            "max-autotune",
            {"max_autotune": True, "triton.cudagraphs": True, "coordinate_descent_tuning": True},
        ),
        ("max-autotune-no-cudagraphs", {"max_autotune": True, "coordinate_descent_tuning": True}),
    ],
)
def test_mode_table(mode: str | None, patches: dict) -> None:
    assert resolve_mode(mode) == patches


def test_mode_table_is_inductors() -> None:
    """The modes are read from the installed Inductor, so they follow torch.compile's."""
    from torch._inductor import list_mode_options

    for mode in valid_modes():
        assert resolve_mode(mode) == dict(list_mode_options(mode) if mode != "default" else {})


def test_valid_modes() -> None:
    modes = valid_modes()
    assert modes[0] == "default"
    assert set(REQUIRED_MODES) <= set(modes)


def test_result_is_a_fresh_dict() -> None:
    resolve_mode("reduce-overhead")["triton.cudagraphs"] = False
    assert resolve_mode("reduce-overhead") == {"triton.cudagraphs": True}


def test_unknown_mode_lists_valid_modes() -> None:
    with pytest.raises(InvalidBackend) as info:
        resolve_mode("max-autotun")
    message = str(info.value)
    assert "unknown mode 'max-autotun'" in message
    assert "Did you mean 'max-autotune'?" in message
    for mode in REQUIRED_MODES:
        assert mode in message
    assert isinstance(info.value, ValueError)


def test_mode_must_be_a_string() -> None:
    with pytest.raises(InvalidBackend, match="mode must be a str or None, got int"):
        resolve_mode(3)  # type: ignore[arg-type]


def test_mode_and_options_together_raise_like_torch_compile() -> None:
    with pytest.raises(InvalidBackend) as info:
        resolve_mode("default", {"max_autotune": True})
    assert str(info.value) == ("Either mode or options can be specified, but both can't be specified at the same time.")
    with pytest.raises(InvalidBackend, match="Either mode or options"):
        resolve_mode("default", {})


def test_options_become_patches() -> None:
    assert resolve_mode(options={}) == {}
    assert resolve_mode(options={"max_autotune": True, "triton.cudagraphs": False}) == {
        "max_autotune": True,
        "triton.cudagraphs": False,
    }
    # torch.compile accepts dashes in option names
    assert resolve_mode(options={"max-autotune": True}) == {"max_autotune": True}


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(InvalidBackend) as info:
        resolve_mode(options={"max_autotun": True})
    message = str(info.value)
    assert "unknown Inductor option 'max_autotun'" in message
    assert "'max_autotune'" in message
    assert "torch._inductor.list_options()" in message


def test_option_of_the_wrong_type() -> None:
    with pytest.raises(InvalidBackend, match="'max_autotune' must be bool, got str"):
        resolve_mode(options={"max_autotune": "yes"})
    with pytest.raises(InvalidBackend, match="options must be a dict"):
        resolve_mode(options=[("max_autotune", True)])  # type: ignore[arg-type]


def test_inductor_backend_validates_when_made() -> None:
    backend = inductor_backend(mode="reduce-overhead")
    assert callable(backend)
    assert backend.config_patches == {"triton.cudagraphs": True}
    with pytest.raises(InvalidBackend, match="unknown mode"):
        inductor_backend(mode="turbo")
    with pytest.raises(InvalidBackend, match="unknown Inductor option"):
        inductor_backend(options={"not_an_option": 1})
    with pytest.raises(InvalidBackend, match="Either mode or options"):
        inductor_backend(mode="max-autotune", options={"max_autotune": True})
