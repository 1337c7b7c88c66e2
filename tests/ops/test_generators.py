"""Every argument type materialized with the right dtype, shape and device."""

import pytest
import torch

from torchmark.ops.generators import DTYPE_NAMES, DataGenerator, seed_for


@pytest.mark.parametrize("name", list(DTYPE_NAMES))
def test_tensor_dtypes_and_shapes(name):
    t = DataGenerator("cpu", 0).value({"type": "tensor", "shape": [3, 5], "dtype": name})
    assert t.dtype == getattr(torch, DTYPE_NAMES[name])
    assert t.shape == (3, 5) and t.device.type == "cpu"
    assert t.requires_grad == t.dtype.is_floating_point  # PARAM's default, where possible


def test_value_ranges_and_requires_grad():
    gen = DataGenerator("cpu", 1)
    f = gen.value({"type": "tensor", "shape": [1000], "dtype": "double",
                   "value_range": [5, 6], "requires_grad": False})
    assert not f.requires_grad and 5 <= f.min() and f.max() < 6
    i = gen.value({"type": "tensor", "shape": [1000], "dtype": "long", "value_range": [0, 3]})
    assert set(i.unique().tolist()) == {0, 1, 2, 3}
    u = gen.value({"type": "tensor", "shape": [100], "dtype": "uint8"})
    assert u.min() >= 0
    scalar = gen.value({"type": "tensor", "shape": [], "dtype": "float"})
    assert scalar.dim() == 0
    with pytest.raises(ValueError, match="cannot require grad"):
        gen.value({"type": "tensor", "shape": [2], "dtype": "int", "requires_grad": True})


def test_scalars_lists_and_devices():
    gen = DataGenerator("cpu", 2)
    assert gen.value({"type": "int", "value": 7}) == 7
    assert 3 <= gen.value({"type": "long", "value_range": [3, 4]}) <= 4
    x = gen.value({"type": "double", "value_range": [0.5, 0.75]})
    assert isinstance(x, float) and 0.5 <= x <= 0.75
    assert gen.value({"type": "float", "value": 2}) == 2.0
    assert gen.value({"type": "bool", "value": True}) is True
    assert gen.value({"type": "str", "value": "mean"}) == "mean"
    assert gen.value({"type": "none"}) is None
    assert gen.value({"type": "device", "value": "meta"}) == torch.device("meta")
    items = gen.value({"type": "genericlist", "value": [
        {"type": "int", "value": 1}, {"type": "tensor", "shape": [2], "dtype": "float"}]})
    assert isinstance(items, list) and items[0] == 1 and items[1].shape == (2,)
    pair = gen.value({"type": "tuple", "value": [{"type": "int", "value": 1}] * 2})
    assert pair == (1, 1)
    args, kwargs = gen.arguments({"args": [{"type": "int", "value": 1}],
                                  "kwargs": {"alpha": {"type": "float", "value": 0.5}}})
    assert args == [1] and kwargs == {"alpha": 0.5}


def test_data_depends_only_on_the_case_id():
    spec = {"type": "tensor", "shape": [4], "dtype": "float"}
    a = DataGenerator("cpu", seed_for("torch.mm|0|0|0_1")).value(spec)
    DataGenerator("cpu", seed_for("other")).value(spec)
    b = DataGenerator("cpu", seed_for("torch.mm|0|0|0_1")).value(spec)
    assert torch.equal(a, b)
    c = DataGenerator("cpu", seed_for("torch.mm|0|0|0_2")).value(spec)
    assert not torch.equal(a, c)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_land_on_cuda():
    t = DataGenerator("cuda", 0).value({"type": "tensor", "shape": [2], "dtype": "float16"})
    assert t.device.type == "cuda" and t.dtype == torch.float16


@pytest.mark.parametrize("dtype, value_range", [
    ("double", [0, 1e40]), ("double", [-1e300, 1e300]), ("float", [-3e38, 3e38]),
    ("bfloat16", [-3e38, 3e38]), ("long", [0, 2**63 - 2]),
])
def test_wide_value_ranges_stay_finite_and_in_range(dtype, value_range):
    spec = {"type": "tensor", "shape": [256], "dtype": dtype, "value_range": value_range,
            "requires_grad": False}
    t = DataGenerator("cpu", 0).tensor(spec)
    assert t.dtype == getattr(torch, DTYPE_NAMES[dtype])
    if t.is_floating_point():
        assert torch.isfinite(t).all()
    assert value_range[0] <= t.double().min() and t.double().max() <= value_range[1] * 1.001
