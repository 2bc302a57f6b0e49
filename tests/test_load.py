"""The load stage: targets, input specs, dynamic specs, carried inputs (no export involved)."""

import pytest
import torch

from fxport.errors import InputSpecError, ModelLoadError
from fxport.load.targets import inputs_from_specs, load_model, resolve_target
from fxport.eager.inputs import parse_dynamic_spec, parse_input_spec


def test_parse_input_spec_shapes_and_dtypes():
    assert parse_input_spec("x=1x3x224x224").shape == (1, 3, 224, 224)
    spec = parse_input_spec("ids=2x8:int64")
    assert spec.dtype == torch.int64 and spec.shape == (2, 8)
    assert parse_input_spec("n=scalar:int64").shape == ()


@pytest.mark.parametrize("text", ["x", "x=", "x=2xa", "x=2x-1", "1x=3", "x=2:complex7"])
def test_bad_input_specs_are_one_line_errors(text):
    with pytest.raises(InputSpecError) as info:
        parse_input_spec(text)
    assert "\n" not in str(info.value)


def test_parse_dynamic_spec():
    assert parse_dynamic_spec("x:0=batch,2=h") == {"x": {0: "batch", 2: "h"}}
    for bad in ["x", "x:0", "x:a=b", "x:0=1bad"]:
        with pytest.raises(InputSpecError):
            parse_dynamic_spec(bad)


def test_targets_by_file_and_by_module(models_dir):
    assert resolve_target(f"{models_dir}/basic.py:Scale").__name__ == "Scale"
    assert resolve_target("torch.nn:ReLU") is torch.nn.ReLU


@pytest.mark.parametrize(
    "target, fragment",
    [
        ("tests/models/nope.py:Net", "does not exist"),
        ("no_such_pkg_xyz.models:Net", "cannot be imported"),
        ("tests/models/basic.py:Nope", "has no attribute 'Nope'"),
        ("tests/models/basic.py:not_a_model", "not a module"),
        ("tests/models/basic.py:NeedsArgs", "needs constructor arguments (width)"),
        ("tests/models/basic.py:RaisesInInit", "broken constructor"),
        ("tests/models/syntax_error.py:Net", "SyntaxError: invalid syntax at tests/models/syntax_error.py:4"),
        ("tests/models/basic.py", "is not of the form"),
    ],
)
def test_bad_targets(target, fragment):
    with pytest.raises(ModelLoadError) as info:
        load_model(target)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_raising_constructor_points_at_user_line():
    with pytest.raises(ModelLoadError) as info:
        load_model("tests/models/basic.py:RaisesInInit")
    assert "basic.py:" in str(info.value)


def test_factory_instance_and_carried_inputs():
    for name in ["Scale", "make_scale", "scale_instance"]:
        loaded = load_model(f"tests/models/basic.py:{name}")
        assert loaded.input_sets[0].args[0].shape == (2, 4)
        assert loaded.dynamic_shapes == {"x": {0: "batch"}}
        assert not loaded.module.training


def test_inputs_from_specs_match_forward_parameters():
    from tests.models.basic import TwoInputs

    inputs = inputs_from_specs(TwoInputs(), [parse_input_spec("ids=2:int64"), parse_input_spec("x=2x3")])
    assert [t.shape for t in inputs.args] == [(2, 3), (2,)]
    assert inputs.args[1].dtype == torch.int64
    with pytest.raises(InputSpecError, match="not parameters"):
        inputs_from_specs(TwoInputs(), [parse_input_spec("z=2")])
    with pytest.raises(InputSpecError, match="no input given for parameter 'ids'"):
        inputs_from_specs(TwoInputs(), [parse_input_spec("x=2x3")])


def test_missing_inputs_say_what_to_pass():
    with pytest.raises(InputSpecError, match="-i x=SHAPE -i y=SHAPE"):
        load_model("tests/models/basic.py:NoInputs")


def test_inputs_fn_gives_several_sets():
    loaded = load_model("tests/models/basic.py:TwoInputs", inputs_fn="tests/models/basic.py:inputs_for_two")
    assert [s.name for s in loaded.input_sets] == ["example", "user-1"]
