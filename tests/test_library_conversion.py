"""Library code conversion (issue 13 item 6): when capture stops on data-dependent control flow
inside an installed package, fxport converts that function for the capture only, records it
with the library's file:line and verifies the result; ``convert_libraries=False`` refuses.

The "installed package" is ``fakelib``, written to a ``site-packages`` folder in a temporary
directory (fxport.common.frames counts such paths as installed libraries, not the user's code).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import fxport
from fxport.controlflow import convert_control_flow
from fxport.controlflow import libraries
from fxport.controlflow import operators as runtime
from fxport.common.frames import is_user_file
from tests.controlflow._util import assert_matches_eager, export_to_ort

FAKELIB = '''\
import torch


def halve_until_small(y):
    while torch.abs(y).sum() > 4.0:
        y = y * 0.5
    return y


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        if x.mean() > 0:
            y = self.proj(x) + x
        else:
            y = -x
        return halve_until_small(y)


class LambdaGate(torch.nn.Module):
    gate = staticmethod(lambda x: x * 2 if x.sum() > 0 else x)

    def forward(self, x):
        return self.gate(x)
'''


def line_of(text: str) -> int:
    return next(number for number, line in enumerate(FAKELIB.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def fakelib(tmp_path_factory):
    """``fakelib.blocks`` imported from a temporary site-packages folder (removed afterwards)."""
    root = tmp_path_factory.mktemp("env") / "site-packages"
    (root / "fakelib").mkdir(parents=True)
    (root / "fakelib" / "__init__.py").write_text("")
    (root / "fakelib" / "blocks.py").write_text(FAKELIB)
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("fakelib.blocks")
        assert not is_user_file(module.__file__)
        yield module
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name == "fakelib" or name.startswith("fakelib.")]:
            del sys.modules[name]


class UsesLibrary(torch.nn.Module):
    """User code around the library block: the library's if and while stop capture."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return self.block(x) + 1


def library_outcomes(model, records, inputs) -> dict[tuple[str, int], set]:
    """``{(kind, line): outcomes}`` of the library's converted statements run eagerly."""
    seen: dict[tuple[str, int], set] = {}
    with libraries.installed_for(records), convert_control_flow(model), runtime.coverage() as notes, torch.no_grad():
        for args in inputs:
            model(*args)
    for kind, location, outcome in notes:
        if not is_user_file(location.filename):
            seen.setdefault((kind, location.lineno), set()).add(outcome)
    return seen


def inputs_for_every_path() -> list[tuple[torch.Tensor]]:
    """Both sides of the library's if; 0, 1, 2 and N trips of its while loop; batch 1 and others."""
    small = torch.full((2, 3), 0.1)
    return [
        (-small,),                               # negative mean, sum |y| = 0.6: 0 trips
        (-torch.full((2, 3), 1.0),),             # 6.0: 1 trip
        (-torch.full((1, 3), 2.0),),             # 6.0 at batch 1: 1 trip
        (-torch.full((3, 3), 1.0),),             # 9.0: 2 trips
        (-torch.full((4, 3), 30.0),),            # 360: N trips
        (torch.full((2, 3), 5.0),),              # positive mean: the proj side
        (torch.rand(5, 3) + 0.2,),
        (small,),
    ]


def test_library_function_is_converted_recorded_and_matches_eager(fakelib):
    block = fakelib.Block()
    model = UsesLibrary(block).eval()
    original_forward, original_helper = fakelib.Block.forward, fakelib.halve_until_small
    inputs = inputs_for_every_path()
    exported = export_to_ort(model, inputs[1], dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)},))

    library = [r for r in exported.records if r.rule == "library-function"]
    assert [r.data["function"] for r in library] == ["Block.forward", "halve_until_small"]
    assert [str(r.location) for r in library] == [f"fakelib/blocks.py:{line_of('if x.mean() > 0')}",
                                                  f"fakelib/blocks.py:{line_of('while torch.abs(y)')}"]
    assert library[0].detail == f"converted library code: Block.forward at fakelib/blocks.py:{line_of('if x.mean()')}"
    statements = {(r.rule, str(r.location)) for r in exported.records if r.rule != "library-function"}
    assert ("if-to-cond", f"fakelib/blocks.py:{line_of('if x.mean() > 0')}") in statements
    assert ("while-to-while_loop", f"fakelib/blocks.py:{line_of('while torch.abs(y)')}") in statements
    assert exported.ops.get("If", 0) >= 1 and exported.ops.get("Loop", 0) == 1

    # nothing of the library (or the user's module) is left changed
    assert fakelib.Block.forward is original_forward and fakelib.halve_until_small is original_helper
    assert runtime.CONVERTED.get(original_forward) is None and runtime.CONVERTED.get(original_helper) is None
    assert "forward" not in block.__dict__

    outcomes = library_outcomes(model, exported.records, inputs)
    assert outcomes[("if", line_of("if x.mean() > 0"))] == {True, False}
    assert {0, 1, 2} <= outcomes[("while", line_of('while torch.abs(y)'))]
    assert max(o for o in outcomes[("while", line_of("while torch.abs(y)"))] if isinstance(o, int)) >= 5
    assert_matches_eager(model, exported, inputs)


def test_convert_verifies_and_reports_library_statements_at_their_library_lines(fakelib):
    model = UsesLibrary(fakelib.Block()).eval()
    result = fxport.convert(model, (-torch.full((3, 3), 1.0),), dynamic_shapes={"x": {0: "batch"}})
    assert result.verified
    rules = [r.rule for r in result.rewrites]
    assert rules.count("library-function") == 2
    coverage = {c["location"]: c for c in result.coverage}
    assert f"fakelib/blocks.py:{line_of('if x.mean() > 0')}" in coverage  # observed with the library converted
    assert not any("never ran" in warning for warning in result.warnings)
    json_rows = [row for row in result.to_dict()["rewrites"] if row["rule"] == "library-function"]
    assert json_rows[0]["location"] == f"fakelib/blocks.py:{line_of('if x.mean() > 0')}"


def test_no_convert_libraries_refuses_in_one_line_naming_the_library_line(fakelib):
    model = UsesLibrary(fakelib.Block()).eval()
    with pytest.raises(fxport.CaptureError) as info:
        fxport.convert(model, (torch.randn(2, 3),), convert_libraries=False)
    message = str(info.value)
    assert "\n" not in message
    assert f"library code at fakelib/blocks.py:{line_of('if x.mean() > 0')}" in message
    assert "library code conversion is off" in message and "--no-convert-libraries" in message
    assert "test_library_conversion.py:" in message  # the user's line that called it
    assert fakelib.Block.forward is fakelib.Block.__dict__["forward"]


def test_a_lambda_in_library_code_is_refused_in_one_line(fakelib):
    model = UsesLibrary(fakelib.LambdaGate()).eval()
    with pytest.raises(fxport.CaptureError) as info:
        fxport.convert(model, (torch.randn(2, 3),), verify=False)
    message = str(info.value)
    assert "\n" not in message
    assert f"is in <lambda> at fakelib/blocks.py:{line_of('gate = staticmethod')}, which fxport cannot convert" in message
    assert isinstance(fakelib.LambdaGate.__dict__["gate"], staticmethod)


def test_library_functions_are_bounded_per_capture(fakelib, monkeypatch):
    monkeypatch.setattr(libraries, "MAX_LIBRARY_FUNCTIONS", 1)
    model = UsesLibrary(fakelib.Block()).eval()
    with pytest.raises(fxport.CaptureError, match=r"one library function more than the 1 fxport converts") as info:
        fxport.convert(model, (torch.randn(2, 3),), verify=False)
    assert "halve_until_small at fakelib/blocks.py:" in str(info.value)
    assert fakelib.Block.forward is fakelib.Block.__dict__["forward"]
    assert runtime.CONVERTED.get(fakelib.Block.__dict__["forward"]) is None


MODEL_FILE = '''\
import sys
sys.path.insert(0, {root!r})
import torch
from fakelib.blocks import Block


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x) * 2
'''


@pytest.mark.slow
def test_cli_says_which_library_code_it_converted(fakelib, tmp_path):
    root = os.path.dirname(os.path.dirname(fakelib.__file__))
    model_file = tmp_path / "net.py"
    model_file.write_text(MODEL_FILE.format(root=root))
    out = tmp_path / "net.onnx"
    command = [sys.executable, "-m", "fxport.cli", "convert", f"{model_file}:Net", "-i", "x=3x3",
               "--dynamic", "x:0=batch", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    line = f"converted library code: Block.forward at fakelib/blocks.py:{line_of('if x.mean() > 0')}"
    assert line in done.stdout.splitlines()
    assert "verified; wrote" in done.stdout and out.exists()

    refused = subprocess.run(command + ["--no-convert-libraries"], capture_output=True, text=True, env=env,
                             timeout=300)
    assert refused.returncode == 1
    error = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and "library code conversion is off" in error[0], refused.stderr


# --- transformers' Mixtral with the eager experts loop ------------------------------------------

class EagerExpertsMixtral(torch.nn.Module):
    """A tiny random Mixtral whose experts run transformers' own loop (``for expert_idx in
    expert_hit:`` in modeling_mixtral.py, selected by ``experts_implementation="eager"``)."""

    def __init__(self):
        super().__init__()
        transformers = pytest.importorskip("transformers")
        torch.manual_seed(0)
        config = transformers.MixtralConfig(
            num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
            num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=100,
            max_position_embeddings=64, attn_implementation="eager", experts_implementation="eager")
        self.model = transformers.MixtralModel(config).eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def tokens_per_expert(model: EagerExpertsMixtral, input_ids: torch.Tensor) -> list[int]:
    """How many tokens the router sends to each expert (read from the router's top-k indices)."""
    seen = []
    gate = model.model.layers[0].mlp.gate
    handle = gate.register_forward_hook(lambda module, args, output: seen.append(output[2]))
    try:
        with torch.no_grad():
            model(input_ids)
    finally:
        handle.remove()
    return torch.bincount(seen[0].flatten(), minlength=gate.num_experts).tolist()


def routed_sets(model: EagerExpertsMixtral) -> list[torch.Tensor]:
    """Token ids whose routing leaves some expert without tokens and gives one expert exactly
    one token and another several; plus a single token (two experts, one token each)."""
    generator = torch.Generator().manual_seed(3)
    found = []
    for seq in (2, 3, 4, 5):
        for _ in range(200):
            ids = torch.randint(0, 100, (1, seq), generator=generator)
            counts = tokens_per_expert(model, ids)
            if 0 in counts and 1 in counts and max(counts) >= 2:
                found.append(ids)
                break
    assert len(found) >= 2, "no input routes tokens to 0, 1 and several experts at once"
    return [*found, torch.tensor([[7]])]


@pytest.mark.slow
def test_transformers_mixtral_eager_experts_converts_and_verifies():
    model = EagerExpertsMixtral()
    module = sys.modules[type(model.model).__module__]
    experts = module.MixtralExperts.forward
    sets = routed_sets(model)
    assert any(tokens_per_expert(model, ids).count(0) >= 2 for ids in sets)
    result = fxport.convert(model, (torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0)),),
                            dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}}, verify_inputs=[(ids,) for ids in sets])
    assert result.verified
    assert all(row.passed for row in result.verification if row.name.startswith("user-"))
    library = [r for r in result.rewrites if r.rule == "library-function"]
    assert [r.data["function"] for r in library] == ["MixtralExperts.forward"]
    loop_line = next(number for number, line in enumerate(open(module.__file__), 1)
                     if "for expert_idx in expert_hit:" in line)
    assert str(library[0].location) == f"transformers/models/mixtral/modeling_mixtral.py:{loop_line}"
    assert ("for-to-while_loop", loop_line) in {(r.rule, r.location.lineno) for r in result.rewrites if r.location}
    assert result.op_counts().get("Loop") == 1
    assert module.MixtralExperts.forward is experts  # the library is left as it was

    # the file against eager on the routed sets and other sizes, outside fxport's own verification
    from tests.conftest import run_onnx

    for ids in [*sets, torch.randint(0, 100, (3, 11), generator=torch.Generator().manual_seed(5))]:
        with torch.no_grad():
            expected = model(ids)
        torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, ids)[0]), expected, atol=1e-4, rtol=1e-3)
