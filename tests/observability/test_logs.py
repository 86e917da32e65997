"""Each log name of STENOGRAPH_LOGS / set_logs() prints what it promises, and only when enabled."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from helpers import line_of

import stenograph
from stenograph import config, logs
from stenograph.errors import InvalidConfig

from ._support import SCRIPTS, breaking, run_cli


def straight(x):
    return torch.sin(x) + 1


def run_breaking() -> None:
    g = stenograph.compile(breaking, backend="eager")
    g(torch.randn(4), 1)
    g(torch.randn(4), 2)


def test_logs_are_silent_by_default(capsys):
    run_breaking()
    assert "[stenograph." not in capsys.readouterr().err


def test_graph_code_prints_each_graph(capsys):
    stenograph.set_logs(graph_code=True)
    stenograph.compile(straight, backend="eager")(torch.randn(3))
    err = capsys.readouterr().err
    assert "[stenograph.graph_code] TRACED GRAPH [" in err
    assert "straight at " in err
    assert "class StenographGraph(torch.nn.Module)" in err
    assert 'sin: "f32[3]" = torch.sin(' in err
    assert "[stenograph.guards]" not in err


def test_graph_breaks_give_reason_and_user_stack_with_source(capsys):
    stenograph.set_logs(graph_breaks=True)
    run_breaking()
    err = capsys.readouterr().err
    assert "[stenograph.graph_breaks]" in err
    assert f"Graph break in user code at {breaking.__code__.co_filename}:" in err
    assert "Reason: call to print" in err
    assert f'File "{breaking.__code__.co_filename}", line {line_of(breaking, "print(")}, in breaking' in err
    assert '    print("between graphs")' in err
    assert "internal stack" not in err


def test_verbose_adds_the_internal_stack(capsys):
    stenograph.set_logs(graph_breaks=True)
    with config.patch(verbose=True):
        run_breaking()
    err = capsys.readouterr().err
    assert "stenograph internal stack (most recent call last):" in err
    assert os.path.join("stenograph", "") in err  # frames inside the package


@config.patch(native_guards=False)  # the tensor check in its Python form
def test_guards_print_the_generated_guard_function(capsys):
    stenograph.set_logs(guards=True)
    stenograph.compile(straight, backend="eager")(torch.randn(3))
    err = capsys.readouterr().err
    assert "[stenograph.guards] GUARDS [" in err
    assert "def ___guard(x):" in err
    assert "x.shape == (3,)" in err


def test_recompiles_name_the_failed_guard_with_old_and_new_value(capsys):
    stenograph.set_logs(recompiles=True)
    g = stenograph.compile(straight, backend="eager")
    g(torch.randn(3))
    g(torch.randn(5))
    err = capsys.readouterr().err
    assert "[stenograph.recompiles] Recompiling straight at" in err
    assert "failed guard (old value): L['x']: Tensor torch.float32 cpu size=[3]" in err
    assert "new value: Tensor torch.float32 cpu size=[5]" in err


def test_recompiles_with_an_int(capsys):
    stenograph.set_logs(recompiles=True)
    run_breaking()
    err = capsys.readouterr().err
    assert "failed guard (old value): L['n'] == 1" in err
    assert "new value: 2" in err


def test_recompile_ids_name_the_failed_entry(capsys):
    stenograph.set_logs(recompiles=True)
    g = stenograph.compile(straight, backend="eager")
    g(torch.randn(3))
    g(torch.randn(5).to(torch.float64))
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "Recompiling" in x)
    new_id = line.split("[")[2].split("]")[0]
    old_id = line.split("the guards of [")[1].split("]")[0]
    assert new_id.split("/")[0] == old_id.split("/")[0]
    assert int(new_id.split("/")[1]) == int(old_id.split("/")[1]) + 1


def test_bytecode_shows_original_and_transformed_code(capsys):
    stenograph.set_logs(bytecode=True)
    stenograph.compile(straight, backend="eager")(torch.randn(3))
    err = capsys.readouterr().err
    assert "ORIGINAL BYTECODE [" in err
    assert "LOAD_GLOBAL" in err and "(sin)" in err
    assert "TRANSFORMED CODE [" in err
    assert "def ___transformed(x):" in err
    assert "___out = ___graph(x)" in err
    assert "TRANSFORMED BYTECODE [" in err


def test_dynamic_reports_symbolic_inputs_after_automatic_dynamic(capsys):
    stenograph.set_logs(dynamic=True)
    g = stenograph.compile(straight, backend="eager")
    g(torch.randn(3))
    g(torch.randn(5))
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("[stenograph.dynamic]")]
    assert "all sizes and values static" in lines[0]
    assert "dynamic inputs: L['x'] size=[" in lines[1]
    assert "shape guards:" in err


def test_set_logs_replaces_the_previous_setting(capsys):
    stenograph.set_logs(guards=True)
    stenograph.set_logs(graph_code=True)
    stenograph.compile(straight, backend="eager")(torch.randn(3))
    err = capsys.readouterr().err
    assert "[stenograph.graph_code]" in err
    assert "[stenograph.guards]" not in err


def test_set_logs_rejects_non_bools():
    with pytest.raises(TypeError, match="takes a bool"):
        stenograph.set_logs(guards="yes")


def test_loggers_work_with_the_logging_module(caplog):
    with caplog.at_level(logging.DEBUG, logger="stenograph.guards"):
        stenograph.compile(straight, backend="eager")(torch.randn(3))
    messages = [r.getMessage() for r in caplog.records if r.name == "stenograph.guards"]
    assert messages and "def ___guard(x):" in messages[0]


def test_parse_setting():
    assert logs.parse_setting("graph_code, guards") == {
        "graph_code": True,
        "graph_breaks": False,
        "guards": True,
        "recompiles": False,
        "bytecode": False,
        "dynamic": False,
        "ddp_graphs": False,
        "cache": False,
    }
    assert all(logs.parse_setting("all").values())
    with pytest.raises(InvalidConfig, match="(?s)unknown log name.*nope.*graph_breaks"):
        logs.parse_setting("guards,nope")


def test_environment_variable_enables_logs(tmp_path):
    script = os.path.join(SCRIPTS, "breaks_and_recompiles.py")
    result = run_cli(
        ["run", "--report", str(tmp_path / "r.html"), script],
        cwd=str(tmp_path),
        env={"STENOGRAPH_LOGS": "graph_breaks,recompiles"},
    )
    assert result.returncode == 0, result.stderr
    assert "[stenograph.graph_breaks]" in result.stderr
    assert "Reason: call to print" in result.stderr
    assert "[stenograph.recompiles] Recompiling" in result.stderr
    assert "[stenograph.guards]" not in result.stderr
