"""The way in from JAX, as a user takes it (`make test-jax`: a venv with vxla[jax] and flax):
a flax model submitted to a devnet in three lines comes back in its own structure, close to
jax.jit's outputs; and StableHLO text and jax.export artifacts are accepted by `vxla
convert` and `vxla run`, which hash and run the HLO text they convert to."""

from __future__ import annotations

import json
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import node.sdk
from node.cli import main
from node.devnet import down, up


class ConvNet(nn.Module):
    """A small CNN: convolution, max pooling, dense layers; returns a dict."""

    @nn.compact
    def __call__(self, x: jax.Array) -> dict[str, jax.Array]:
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape(x.shape[0], -1)
        logits = nn.Dense(10)(nn.relu(nn.Dense(32)(x)))
        return {"logits": logits, "probabilities": jax.nn.softmax(logits)}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("jax") / "devnet"
    up(directory, 3)
    yield directory
    down(directory)


def _model() -> tuple[ConvNet, dict, np.ndarray]:
    model = ConvNet()
    x = np.random.default_rng(0).standard_normal((4, 12, 12, 3)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(0), x)
    return model, params, x


def test_a_flax_model_in_three_lines(devnet: Path) -> None:
    model, params, x = _model()

    client = node.sdk.connect(devnet)
    outputs = client.submit(model.apply, params, x, redundancy=3).outputs()

    expected = jax.jit(model.apply)(params, x)
    assert set(outputs) == {"logits", "probabilities"}
    for name in outputs:
        assert outputs[name].shape == expected[name].shape and outputs[name].dtype == np.float32
        np.testing.assert_allclose(outputs[name], np.asarray(expected[name]), rtol=1e-4, atol=1e-5)


def test_stablehlo_and_jax_export_files_run_as_the_hlo_they_convert_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, params, x = _model()

    def apply(p: dict, inputs: jax.Array) -> jax.Array:
        return model.apply(p, inputs)["logits"]

    leaves = jax.tree_util.tree_leaves((params, x))
    flat = lambda *a: apply(*jax.tree_util.tree_unflatten(jax.tree_util.tree_structure((params, x)), list(a)))  # noqa: E731
    (tmp_path / "model.mlir").write_text(jax.jit(flat, keep_unused=True).lower(*leaves).as_text())
    (tmp_path / "model.bin").write_bytes(jax.export.export(jax.jit(flat, keep_unused=True))(*leaves).serialize())
    inputs = []
    for number, leaf in enumerate(leaves):
        np.save(tmp_path / f"in{number}.npy", np.asarray(leaf))
        inputs.append(str(tmp_path / f"in{number}.npy"))
    expected = np.asarray(jax.jit(flat)(*leaves))
    for name in ("model.mlir", "model.bin"):
        assert main(["convert", str(tmp_path / name), "-o", str(tmp_path / f"{name}.hlo")]) == 0
        assert (tmp_path / f"{name}.hlo").read_text().startswith("HloModule")
        capsys.readouterr()
        assert main(["run", str(tmp_path / name), *inputs, "--json", "--out", str(tmp_path / "out.npz")]) == 0
        report = json.loads(capsys.readouterr().out)
        assert main(["inspect", str(tmp_path / f"{name}.hlo"), "--json"]) == 0
        converted = json.loads(capsys.readouterr().out)
        assert report["hlo_hash"] == converted["hlo_hash"]  # the converted HLO text is the program
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["out0"], expected, rtol=1e-4, atol=1e-5)


def test_converted_programs_keep_their_large_constants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Weights closed over (as a converted Llama's are) are constants in the program: `vxla
    convert` prints them in full, so its output runs as it is and gives the original's bits."""
    weights = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)

    def layer(inputs: jax.Array) -> jax.Array:
        return jnp.tanh(inputs @ weights)

    (tmp_path / "layer.mlir").write_text(jax.jit(layer).lower(x).as_text())
    (tmp_path / "layer.bin").write_bytes(jax.export.export(jax.jit(layer))(x).serialize())
    np.save(tmp_path / "x.npy", x)
    for name in ("layer.mlir", "layer.bin"):
        converted = tmp_path / f"{name}.hlo"
        assert main(["convert", str(tmp_path / name), "-o", str(converted)]) == 0
        assert "{...}" not in converted.read_text()
        capsys.readouterr()
        assert main(["run", str(converted), str(tmp_path / "x.npy"), "--out", str(tmp_path / "converted.npz")]) == 0
        assert main(["run", str(tmp_path / name), str(tmp_path / "x.npy"), "--out", str(tmp_path / "original.npz")]) == 0
        assert np.load(tmp_path / "converted.npz")["out0"].tobytes() == np.load(tmp_path / "original.npz")["out0"].tobytes()
        np.testing.assert_allclose(np.load(tmp_path / "converted.npz")["out0"], np.asarray(jax.jit(layer)(x)), rtol=1e-4, atol=1e-5)


def test_a_file_that_is_not_a_program_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.bin").write_bytes(b"\xff\xfe\x00 not a program")
    assert main(["convert", str(tmp_path / "junk.bin")]) == 2
    assert "not a jax.export artifact" in capsys.readouterr().err
    (tmp_path / "text.mlir").write_text("hello")
    assert main(["run", str(tmp_path / "text.mlir")]) == 2
    assert "line 1, column 1: expected 'HloModule'" in capsys.readouterr().err  # text is read as HLO


def test_outputs_of_a_pytree_function_on_a_single_node(devnet: Path) -> None:
    """A node URL instead of a devnet: redundancy 1, no chain; tuples and scalars."""
    from node.devnet import DevnetState

    url = DevnetState.load(devnet).nodes[0].url
    client = node.sdk.connect(url)
    a, b = client.submit(lambda p, s: (p["w"] @ p["w"].T * s, jnp.sum(p["w"])), {"w": np.eye(3, dtype=np.float32)}, 2.0).outputs()
    np.testing.assert_array_equal(a, 2 * np.eye(3, dtype=np.float32))
    assert float(b) == 3.0


def test_int4_weights_go_in_and_come_back_as_jax_types_them(devnet: Path) -> None:
    """int4 arguments travel as the int8 holding them; an int4 result comes back as int4."""
    from node.devnet import DevnetState

    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = jnp.asarray(rng.integers(-8, 8, size=(16, 8)), dtype=jnp.int4)

    def dequantized_matmul(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x @ w.astype(jnp.float32), w + w

    client = node.sdk.connect(DevnetState.load(devnet).nodes[0].url)
    y, doubled = client.submit(dequantized_matmul, x, w).outputs()
    expected_y, expected_doubled = jax.jit(dequantized_matmul)(x, w)
    np.testing.assert_allclose(y, np.asarray(expected_y), rtol=1e-5, atol=1e-5)
    assert doubled.dtype == jnp.int4
    assert doubled.astype(np.int8).tolist() == np.asarray(expected_doubled).astype(np.int8).tolist()  # wrapped at 4 bits


def test_an_unsupported_op_names_the_users_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JAX's HLO with its debug info (op_name, and stack frames into the file tables): a
    refusal names the user's op and file:line, not only the generated instruction."""

    def solve(a: jax.Array) -> jax.Array:
        return jnp.linalg.inv(a)

    a = np.eye(3, dtype=np.float32) * 2
    text = jax.jit(solve).lower(a).as_text(dialect="hlo", debug_info=True)
    (tmp_path / "inv.hlo").write_text(text)
    assert main(["inspect", str(tmp_path / "inv.hlo")]) == 2
    error = capsys.readouterr().err
    line = solve.__code__.co_firstlineno + 1  # the `return jnp.linalg.inv(a)` line
    assert "is not supported" in error and f"test_submit_from_jax.py:{line} (" in error, error
    assert "jit(solve)/" in error, error


def test_inputs_are_named_by_their_pytree_paths_and_debug_info_is_opt_in(devnet: Path) -> None:
    """The node names each input as the user's code does; the user's files and lines reach
    the node only when asked for (debug_info=True), and never change what is hashed."""
    from node.devnet import DevnetState

    def layer(params: dict, x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ params["w"] + params["b"])

    params = {"w": np.ones((3, 4), np.float32), "b": np.zeros(4, np.float32)}
    x = np.ones((2, 3), np.float32)
    client = node.sdk.connect(DevnetState.load(devnet).nodes[0].url)
    private = client.submit(layer, params, x)
    described = private.inputs()
    assert [(item["name"], item["parameter"], item["type"]) for item in described] == [
        ("in0", "params['b']", "f32[4]"), ("in1", "params['w']", "f32[3,4]"), ("in2", "x", "f32[2,3]"),
    ]  # fmt: skip
    text = private.function.hlo_text
    assert "source_file" not in text and "stack_frame_id" not in text and "FileNames" not in text and "test_submit_from_jax" not in text
    debugged = client.submit(layer, params, x, debug_info=True)
    assert "test_submit_from_jax.py" in debugged.function.hlo_text and "jit(layer)/" in debugged.function.hlo_text
    assert debugged.wait(timeout=120).verify().statement.predicate.deterministic.program.hlo_hash == private.wait(timeout=120).verify().statement.predicate.deterministic.program.hlo_hash
    np.testing.assert_array_equal(debugged.outputs(), private.outputs())
