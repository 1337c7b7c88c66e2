"""Your own instruction-count suite: definitions for `torchmark suite list|run --definitions`.

    torchmark suite list --definitions examples/suite_definitions.py
    torchmark suite run --definitions examples/suite_definitions.py --out mine.jsonl
    torchmark suite compare before.jsonl mine.jsonl --format markdown

Each definition yields several cases (Python and C++, eager and TorchScript, forward and
forward + backward, per thread count) from one description.
"""

from torchmark.suite import GroupedModules, GroupedSetup, GroupedStmts, GroupedVariants

SCALE = GroupedSetup(
    py_setup="x = torch.rand(16)\nw = torch.rand(16, requires_grad=True)",
    cpp_setup="auto x = torch::rand({16});\nauto w = torch::rand({16}, torch::requires_grad());",
)

DEFINITIONS = {
    "scale and sum": GroupedStmts(
        py_stmt="y = (x * w).sum()",
        cpp_stmt="auto y = (x * w).sum();",
        setup=SCALE,
        signature="f(x, w) -> y",
        torchscript=True,
        autograd=True,
        num_threads=(1, 2),
    ),
    "MLP block": GroupedModules(
        py_model_setup="model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())",
        cpp_model_setup="auto model = torch::nn::Sequential(torch::nn::Linear(16, 16), "
                        "torch::nn::GELU());",
        setup=GroupedSetup("x = torch.rand(4, 16)", "auto x = torch::rand({4, 16});"),
        signature="f(x) -> y",
        torchscript=True,
    ),
    "activations": GroupedVariants(
        py_block="""
            # @setup
            x = torch.randn(64)
            # @elementwise
            torch.relu(x)
            torch.sigmoid(x)
            torch.tanh(x)
        """,
        cpp_block="""
            // @setup
            auto x = torch::randn({64});
            // @elementwise
            torch::relu(x);
            torch::sigmoid(x);
            torch::tanh(x);
        """,
    ),
}

if __name__ == "__main__":
    from torchmark.suite import materialize

    for case in materialize(DEFINITIONS):
        print(case.id)
