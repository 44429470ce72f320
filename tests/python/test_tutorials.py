"""The MXNet GPU tutorials' own Python code, run on tagflow with two
simulated GPUs: every block, in order, with only the import line changed
(tutorial_blocks.py lists what is left out, and why). Where a tutorial shows
what a block printed, tagflow must print the same.

The tutorials are read from TAGFLOW_TUTORIALS_DIR (set by CMake to
../shared/seeds beside the source tree); without them the test is skipped,
saying so."""

import ast
import contextlib
import io
import os
import re
from pathlib import Path

import pytest

import tagflow as mx
from tutorial_blocks import tutorial_blocks

TUTORIALS = Path(os.environ.get("TAGFLOW_TUTORIALS_DIR", ""))


def tutorial(prefix):
    if not TUTORIALS.is_dir():
        pytest.skip("the tutorials are not here: TAGFLOW_TUTORIALS_DIR=%r" % str(TUTORIALS))
    found = sorted(TUTORIALS.glob(prefix + "_*.txt"))
    if not found:
        pytest.skip("no tutorial %s_*.txt in %s" % (prefix, TUTORIALS))
    return tutorial_blocks(found[0])


def run_block(code, namespace):
    """Runs a block as a notebook cell: the value of a last expression is
    returned as its repr (None when there is no such value)."""
    tree = ast.parse(code)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<tutorial>", "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(last, "<tutorial>", "eval"), namespace)
    return None if value is None else repr(value)


def normalized(text, random_values):
    """Text as compared: IPython indents the lines of a multi-line repr
    inside a tuple, which plain repr does not; random draws differ."""
    text = re.sub(r"\n[ ]+", "\n", text.strip())
    if random_values:
        text = re.sub(r"-?\d+\.\d*(e[-+]\d+)?", "#", text)
        text = re.sub(r"\s*#[\s#]*", "#", text)  # and NumPy's padding of them
    return text


def run_tutorial(blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__tutorial__"}
    outputs = []
    for block in blocks:
        if not block.code.strip():
            continue
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                result = run_block(block.code, namespace)
            except Exception as error:  # the block and its error, to read
                raise AssertionError("%s block %d failed:\n%s\n%s: %s" % (
                    block.tutorial, block.number, block.code, type(error).__name__, error)) from error
        random_values = "random" in block.code
        if block.result is not None:
            assert result is not None, "%s block %d shows a value" % (block.tutorial, block.number)
            assert normalized(result, random_values) == normalized(block.result, random_values), (
                "%s block %d:\n%s" % (block.tutorial, block.number, block.code))
        if block.stdout is not None:
            assert normalized(stdout.getvalue(), random_values) == normalized(
                block.stdout, random_values)
        outputs.append((block, result, stdout.getvalue(), stderr.getvalue()))
    return outputs, namespace


def test_001_gpu_computing_with_nd(tmp_path, monkeypatch):
    outputs, _ = run_tutorial(tutorial("001"), tmp_path, monkeypatch)
    results = {b.code.strip().splitlines()[-1]: r for b, r, _, _ in outputs}
    assert results["mx.cpu(), mx.gpu(), mx.gpu(1)"] == "(cpu(0), gpu(0), gpu(1))"
    assert results["x.context"] == "cpu(0)"
    assert results["y.as_in_context(mx.gpu()) is y"] == "True"
    assert results["y.copyto(mx.gpu()) is y"] == "False"
    assert results["(z + 2).exp() * y"] == "\n[ 20.085537 109.1963   445.2395  ]\n<NDArray 3 @gpu(0)>"
    # Dense flattens all but the first axis: the (3,) input is 3 samples of 1.
    assert results["net[0].weight.data()"].endswith("<NDArray 1x1 @gpu(0)>")


def test_003_gpu_computing_in_chinese(tmp_path, monkeypatch):
    blocks = tutorial("003")
    assert [s for b in blocks for s, _ in b.skipped] == ["!nvidia-smi", "the whole block"]
    outputs, _ = run_tutorial(blocks, tmp_path, monkeypatch)
    errors = [err for _, _, _, err in outputs if err]
    # The blocks that catch mx.MXNetError wrote its message.
    assert any("gpu(10)" in e for e in errors)
    assert any("cpu(0)" in e and "gpu(0)" in e for e in errors)
    printed = [out for b, _, out, _ in outputs if "print(y)" in b.code][0]
    assert printed.startswith("\n[1. 2. 3.]\n<NDArray 3 @gpu(0)>\n[1. 2. 3.]\n6.0")


def test_002_d2l_gpus_mxnet_tab(tmp_path, monkeypatch):
    blocks = tutorial("002")
    outputs, namespace = run_tutorial(blocks, tmp_path, monkeypatch)
    results = {b.code.strip().splitlines()[-1]: r for b, r, _, _ in outputs}
    assert results["cpu(), gpu(), gpu(1)"] == "(cpu(0), gpu(0), gpu(1))"
    assert results["num_gpus()"] == "2"
    assert results["try_gpu(), try_gpu(10), try_all_gpus()"] == "(gpu(0), cpu(0), [gpu(0), gpu(1)])"
    assert results["x.ctx"] == "cpu(0)"
    assert results["X"] == "array([[1., 1., 1.],\n       [1., 1., 1.]], ctx=gpu(0))"
    assert results["Z.as_in_ctx(try_gpu(1)) is Z"] == "True"
    assert results["net[0].weight.data().ctx"] == "gpu(0)"
    printed = [out for b, _, out, _ in outputs if "print(Z)" in b.code][0]
    assert printed == "[[1. 1. 1.]\n [1. 1. 1.]] @gpu(0)\n[[1. 1. 1.]\n [1. 1. 1.]] @gpu(1)\n"
    assert isinstance(namespace["net"](namespace["X"]), mx.np.ndarray)


def save_tutorial_lenet(path):
    """net.params, which the tutorial's earlier step saved: its LeNet (the
    library's, of the same layers), trained by nobody, saved by tagflow."""
    from tagflow import gluon, nd

    net = gluon.model_zoo.lenet()
    net.initialize(init=mx.init.Xavier())
    net(nd.zeros((1, 1, 28, 28)))
    net.save_parameters(str(path))


def test_000_use_gpus_to_increase_efficiency(tmp_path, monkeypatch):
    save_tutorial_lenet(tmp_path / "net.params")
    outputs, namespace = run_tutorial(tutorial("000"), tmp_path, monkeypatch)
    results = {b.code.strip().splitlines()[-1]: r for b, r, _, _ in outputs}
    assert results["npx.num_gpus()"] == "2"
    assert results["x"] == ("array([[1., 1., 1., 1.],\n       [1., 1., 1., 1.],\n"
                            "       [1., 1., 1., 1.]], ctx=gpu(0))")
    assert results["x.copyto(gpu_1)"].endswith("ctx=gpu(1))")
    assert namespace["train_data"].runs_natively
    epochs = [out for b, _, out, _ in outputs if "for epoch in range(10)" in b.code][0]
    losses = [float(v) for v in re.findall(r"Epoch \d+: loss (\d+\.\d+)", epochs)]
    assert len(losses) == 10
    # It learns: the tutorial's LeNet from its uniform initialization goes
    # from chance (ln 10 = 2.303) well down.
    assert losses[0] < 2.31 and losses[-1] < 0.6 * losses[0]
