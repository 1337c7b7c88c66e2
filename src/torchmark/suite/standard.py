"""The standard suite: small, overhead-dominated cases that cover the everyday surface of
PyTorch (allocation, pointwise math, data movement, reductions, indexing, matrix
products, resize and sort, views, small TorchScripted compositions, nn modules, a
training step, InferenceMode), each in Python and C++ where both exist.

Shapes are tiny on purpose: instruction counts of these cases measure the framework's
own overhead (dispatch, argument parsing, TensorIterator set-up), which is what a
regression in PyTorch's C++ or Python layers shows up in.
"""

from __future__ import annotations

from torchmark.suite.grouped import GroupedModules, GroupedSetup, GroupedStmts
from torchmark.suite.variants import GroupedVariants, parse_stmts

_INPUT_SHAPES = {
    "2d": ("x = torch.ones((4, 4))", "auto x = torch::ones({4, 4});"),
    "3d": ("x = torch.ones((2, 4, 4))", "auto x = torch::ones({2, 4, 4});"),
    "4d": ("x = torch.ones((2, 4, 4, 4))", "auto x = torch::ones({2, 4, 4, 4});"),
}

# (name, input, torchscript, Python constructor, C++ constructor)
_MODULES = (
    ("BatchNorm2d", "4d", True, "BatchNorm2d(4)", "BatchNorm2d(4)"),
    ("GroupNorm", "4d", True, "GroupNorm(2, 4)", "GroupNorm(2, 4)"),
    ("LayerNorm", "4d", True, "LayerNorm(4)", "LayerNorm(torch::nn::LayerNormOptions({4}))"),
    ("Conv1d", "3d", True, "Conv1d(4, 4, 1)", "Conv1d(4, 4, 1)"),
    ("Conv2d", "4d", True, "Conv2d(4, 4, 1)", "Conv2d(4, 4, 1)"),
    ("MaxPool2d", "4d", True, "MaxPool2d(2)", "MaxPool2d(2)"),
    ("ReLU", "2d", True, "ReLU()", "ReLU()"),
    ("Sigmoid", "2d", True, "Sigmoid()", "Sigmoid()"),
    ("Linear", "4d", True, "Linear(4, 2)", "Linear(4, 2)"),
    # The LSTM returns a tuple, which the TorchScript cases cannot treat as one tensor.
    ("LSTM", "3d", False, "LSTM(4, 2)", "LSTM(4, 2)"),
)


def _modules() -> dict:
    out = {}
    for name, shape, torchscript, py_ctor, cpp_ctor in _MODULES:
        py_input, cpp_input = _INPUT_SHAPES[shape]
        out[name] = GroupedModules(
            py_model_setup=f"model = torch.nn.{py_ctor}",
            cpp_model_setup=f"auto model = torch::nn::{cpp_ctor};",
            setup=GroupedSetup(py_setup=py_input, cpp_setup=cpp_input),
            signature="f(x) -> y",
            torchscript=torchscript,
        )
    return out


_EMPTY_OVERLOADS_PY = """
    # @keyword arguments
    torch.empty((0,), dtype=torch.float32)
    torch.empty((0,), device="cpu")
    torch.empty((0,), dtype=torch.float32, layout=torch.strided, device="cpu")
"""

_EMPTY_OVERLOADS_CPP = """
    // @setup
    auto default_options = c10::TensorOptions();
    auto float_cpu_options = c10::TensorOptions().dtype(at::kFloat).device(at::kCPU);
    std::optional<at::ScalarType> maybe_float = at::kFloat;

    // @TensorOptions
    at::empty({0}, default_options);
    at::empty({0}, float_cpu_options);
    at::empty({0}, at::kFloat);

    // @optional arguments
    at::empty({0}, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    at::empty({0}, at::kFloat, at::kStrided, at::kCPU, false, std::nullopt);
    at::empty({0}, maybe_float, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
"""

_POINTWISE_MATH = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    torch.manual_seed(20261122)              | torch::manual_seed(20261122);
    x = torch.rand((4, 4))                   | auto x = torch::rand({4, 4});
    y_float = torch.ones((4, 4))             | auto y_float = torch::ones({4, 4});
    y_vector = torch.ones((4, 1))            | auto y_vector = torch::ones({4, 1});
    y_int = torch.ones((4, 4),               | auto y_int = torch::ones({4, 4}, at::kInt);
                       dtype=torch.int32)    |
                                             |
    # @add                                   | // @add
    x += 1.0                                 | x += 1.0;
    x += y_float                             | x += y_float;
    x += y_vector                            | x += y_vector;
    x += y_int                               | x += y_int;
    x + y_float                              | x + y_float;
    torch.add(x, y_float)                    | torch::add(x, y_float);
    torch.add(x, y_float, out=x)             | torch::add_out(x, x, y_float);
                                             |
    # @multiply                              | // @multiply
    x *= 1.0                                 | x *= 1.0;
    x *= y_float                             | x *= y_float;
    x *= y_vector                            | x *= y_vector;
    x *= y_int                               | x *= y_int;
    x * y_float                              | x * y_float;
    torch.mul(x, y_float)                    | torch::mul(x, y_float);
    torch.mul(x, y_float, out=x)             | torch::mul_out(x, x, y_float);
                                             |
    # @equality                              | // @equality
    x == y_float                             | x == y_float;
    x == 1.0                                 | x == 1.0;
    torch.eq(x, y_int)                       | torch::eq(x, y_int);
"""

_DATA_MOVEMENT = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
    y = torch.ones((4, 4))                   | auto y = torch::ones({4, 4});
    x_t = x.t()                              | auto x_t = x.t();
                                             |
    # @contiguous (trivial)                  | // @contiguous (trivial)
    x.contiguous()                           | x.contiguous();
    # @contiguous (non-trivial)              | // @contiguous (non-trivial)
    x_t.contiguous()                         | x_t.contiguous();
    # @clone                                 | // @clone
    x.clone()                                | x.clone();
    # @copy_                                 | // @copy_
    x.copy_(y)                               | x.copy_(y);
    # @zero_                                 | // @zero_
    x.zero_()                                | x.zero_();
    # @fill_                                 | // @fill_
    x.fill_(2.0)                             | x.fill_(2.0);
    # @RNG                                   | // @RNG
    x.uniform_()                             | x.uniform_();
"""

_REDUCTIONS = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
    # @sum                                   | // @sum
    x.sum()                                  | x.sum();
    # @max                                   | // @max
    x.max()                                  | x.max();
    # @mean over a dim                       | // @mean over a dim
    x.mean(1)                                | x.mean(1);
    # @variance                              | // @variance
    x.var(0)                                 | x.var(0);
"""

_INDEXING = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    torch.manual_seed(5061)                  | using namespace torch::indexing;
    x = torch.randn((2, 2, 2))               | torch::manual_seed(5061);
    y = torch.randn((2, 2, 2))               | auto x = torch::randn({2, 2, 2});
    idx = torch.tensor([1, 0])               | auto y = torch::randn({2, 2, 2});
    mask = x > 0                             | auto idx = torch::tensor({1, 0});
                                             | auto mask = x > 0;
                                             |
    # @integer                               | // @integer
    x[0] = 1                                 | x.index_put_({0}, 1);
    x[0, 1] = 1                              | x.index_put_({0, 1}, 1);
    x[0, 1, 0] = 1                           | x.index_put_({0, 1, 0}, 1);
                                             |
    # @ellipsis, slice, None, bool           | // @ellipsis, slice, None, bool
    x[...] = 1                               | x.index_put_({Ellipsis}, 1);
    x[:] = 1                                 | x.index_put_({Slice()}, 1);
    x[None] = 1                              | x.index_put_({None}, 1);
    x[True] = 1                              | x.index_put_({true}, 1);
    x[False] = 1                             | x.index_put_({false}, 1);
                                             |
    # @tensor values                         | // @tensor values
    x[0] = y[0]                              | x.index_put_({0}, y.index({0}));
    x[0, 1] = y[0, 1]                        | x.index_put_({0, 1}, y.index({0, 1}));
    x[:] = y[:]                              | x.index_put_({Slice()}, y.index({Slice()}));
                                             |
    # @advanced                              | // @advanced
    x[idx]                                   | x.index({idx});
    x[mask]                                  | x.index({mask});
    x[idx] = 1                               | x.index_put_({idx}, 1);
"""

_MATMUL = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    a = torch.ones((4, 8))                   | auto a = torch::ones({4, 8});
    b = torch.ones((8, 2))                   | auto b = torch::ones({8, 2});
    v = torch.ones((8,))                     | auto v = torch::ones({8});
    # @mm                                    | // @mm
    torch.mm(a, b)                           | torch::mm(a, b);
    # @matmul                                | // @matmul
    torch.matmul(a, b)                       | torch::matmul(a, b);
    a @ b                                    |
    torch.matmul(a, v)                       | torch::matmul(a, v);
"""

_MISC = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    torch.manual_seed(4242)                  | torch::manual_seed(4242);
    x = torch.rand((16,))                    | auto x = torch::rand({16});
    r = torch.empty((2, 2))                  | auto r = torch::empty({2, 2});
    # @resize_                               | // @resize_
    r.resize_((4, 1))                        | r.resize_({4, 1});
    r.resize_((2, 2))                        | r.resize_({2, 2});
    # @sort                                  | // @sort
    x.sort()                                 | x.sort();
    x.sort(descending=True)                  | x.sort(-1, true);
"""

_METADATA_AND_VIEWS = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    # @setup                                 | // @setup
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
    # @size                                  | // @size
    x.size(0)                                | x.size(0);
    # @stride                                | // @stride
    x.stride(0)                              | x.stride(0);
    # @dim                                   | // @dim
    x.dim()                                  | x.dim();
    # @as_strided                            | // @as_strided
    torch.as_strided(x, (2, 2), (4, 1), 1)   | torch::as_strided(x, {2, 2}, {4, 1}, 1);
    # @select                                | // @select
    x.select(0, 1)                           | x.select(0, 1);
    # @unsqueeze                             | // @unsqueeze
    x.unsqueeze(1)                           | x.unsqueeze(1);
    # @view                                  | // @view
    x.view(16)                               | x.view({16});
    # @transpose                             | // @transpose
    x.t()                                    | x.t();
    # @reshape                               | // @reshape
    x.reshape((2, 8))                        | x.reshape({2, 8});
"""

_TRAINING_SIMPLE = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    h = torch.relu(x * w0 + b0)              | auto h = torch::relu(x * w0 + b0);
    y = (h * w1).sum()                       | auto y = (h * w1).sum();
"""

_TRAINING_SIMPLE_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((4,))                     | auto x = torch::ones({4});
    w0 = torch.ones((4,), requires_grad=True)| auto w0 = torch::ones({4}, torch::requires_grad());
    b0 = torch.zeros((4,),                   | auto b0 = torch::zeros({4}, torch::requires_grad());
                     requires_grad=True)     |
    w1 = torch.ones((4,), requires_grad=True)| auto w1 = torch::ones({4}, torch::requires_grad());
"""

_TRAINING_ENSEMBLE = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    a = torch.nn.functional.gelu(x @ w0)     | auto a = torch::gelu(torch::matmul(x, w0));
    b = torch.nn.functional.silu(u * w1)     | auto b = torch::silu(u * w1);
    c = torch.softmax(torch.cat([a, b]), 0)  | auto c = torch::softmax(torch::cat({a, b}), 0);
    y = c.dot(w2)                            | auto y = c.dot(w2);
"""

_TRAINING_ENSEMBLE_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    torch.manual_seed(77)                    | torch::manual_seed(77);
    x = torch.rand((4, 4))                   | auto x = torch::rand({4, 4});
    u = torch.rand((4,))                     | auto u = torch::rand({4});
    w0 = torch.rand((4,), requires_grad=True)| auto w0 = torch::rand({4}, torch::requires_grad());
    w1 = torch.rand((4,), requires_grad=True)| auto w1 = torch::rand({4}, torch::requires_grad());
    w2 = torch.rand((8,), requires_grad=True)| auto w2 = torch::rand({8}, torch::requires_grad());
"""

_INFERENCE_MODE_CPP = r"""
    // @setup
    auto regular = torch::ones({4, 4});  // made outside InferenceMode
    c10::InferenceMode guard;
    auto x = torch::ones({4, 4});        // an inference tensor

    // @view
    auto y = x.view({16});

    // @in-place
    auto y = x.mul_(1.5);

    // @mixed inputs
    auto y = x + regular;
"""


def _scripted(block: str, setup: str, signature: str, **options):
    """A Python/C++ statement (written as a table) with its TorchScript variants; more
    GroupedStmts `options` (autograd, num_threads) pass through."""
    py_stmt, cpp_stmt = parse_stmts(block)
    py_setup, cpp_setup = parse_stmts(setup)
    return GroupedStmts(py_stmt, cpp_stmt, GroupedSetup(py_setup, cpp_setup),
                        signature=signature, torchscript=True, **options)


_LINEAR_RELU = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    y = torch.relu(torch.mm(x, w) + b)       | auto y = torch::relu(torch::mm(x, w) + b);
"""

_LINEAR_RELU_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((4, 8))                   | auto x = torch::ones({4, 8});
    w = torch.ones((8, 4))                   | auto w = torch::ones({8, 4});
    b = torch.ones((4,))                     | auto b = torch::ones({4});
"""

# the entries of a square matrix off its diagonal, through views only: drop the first
# element, and each row of the (n - 1, n + 1) view starts just after a diagonal entry
_OFF_DIAGONAL = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    y = x.flatten()[1:].view(3, 5)[:, :-1]   | auto y = x.flatten().slice(0, 1)
                                             |           .view({3, 5}).slice(1, 0, -1);
"""

_SQUARE_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
"""

_TENSOR_INDEX = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    a[b, None, ...] = 1                      | a.index_put_({b, torch::indexing::None,
                                             |               torch::indexing::Ellipsis}, 1);
"""

_TENSOR_INDEX_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    a = torch.zeros((4, 4))                  | auto a = torch::zeros({4, 4});
    b = torch.tensor([0, 2])                 | auto b = torch::tensor({0, 2});
"""

_ADD_IN_PLACE = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x += y                                   | x += y;
"""

_ADD_IN_PLACE_SETUP = r"""
    Python                                   | C++
    ---------------------------------------- | ----------------------------------------
    x = torch.ones((4, 4))                   | auto x = torch::ones({4, 4});
    y = torch.ones((4, 4))                   | auto y = torch::ones({4, 4});
"""


def _training(block: str, setup: str, signature: str):
    return _scripted(block, setup, signature, autograd=True, num_threads=(1, 2))


def standard_definitions() -> dict:
    """The standard suite as nested definitions (see `materialize`)."""
    return {
        "Empty": {
            "no allocation": GroupedStmts("torch.empty((0,))", "torch::empty({0});"),
            "with allocation": GroupedStmts("torch.empty((16,))", "torch::empty({16});"),
            "overloads": GroupedVariants(_EMPTY_OVERLOADS_PY, _EMPTY_OVERLOADS_CPP),
        },
        "Pointwise": {
            "Math": GroupedVariants(*parse_stmts(_POINTWISE_MATH)),
            "Math (TorchScript)": {
                "add Tensor-Tensor": _scripted(_ADD_IN_PLACE, _ADD_IN_PLACE_SETUP,
                                               "f(x, y) -> None"),
            },
            "Data movement": GroupedVariants(*parse_stmts(_DATA_MOVEMENT)),
        },
        "Reduction": GroupedVariants(*parse_stmts(_REDUCTIONS)),
        "Indexing": {
            **GroupedVariants(*parse_stmts(_INDEXING)),
            "tensor index (TorchScript)": _scripted(_TENSOR_INDEX, _TENSOR_INDEX_SETUP,
                                                    "f(a, b) -> None"),
        },
        "MatMul": GroupedVariants(*parse_stmts(_MATMUL)),
        "Misc": GroupedVariants(*parse_stmts(_MISC)),
        "Mesoscale": {
            "Linear-bias-ReLU": _scripted(_LINEAR_RELU, _LINEAR_RELU_SETUP, "f(x, w, b) -> y"),
            "off-diagonal entries": _scripted(_OFF_DIAGONAL, _SQUARE_SETUP, "f(x) -> y"),
        },
        "Metadata and views": GroupedVariants(*parse_stmts(_METADATA_AND_VIEWS)),
        "nn Modules": _modules(),
        "Training": {
            "simple": _training(_TRAINING_SIMPLE, _TRAINING_SIMPLE_SETUP, "f(x, w0, b0, w1) -> y"),
            "ensemble": _training(_TRAINING_ENSEMBLE, _TRAINING_ENSEMBLE_SETUP,
                                  "f(x, u, w0, w1, w2) -> y"),
        },
        "InferenceMode": GroupedVariants(cpp_block=_INFERENCE_MODE_CPP),
    }


def standard_cases():
    """The materialized standard suite."""
    from torchmark.suite.materialize import materialize

    return materialize(standard_definitions())
