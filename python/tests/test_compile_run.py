"""weft.compile and Program.run: the compiler library in-process, the
model loaded in-process, checked against the executable weftc builds."""

import subprocess

import numpy as np
import pytest

import weft


def token_ids(shape, seed=0, vocab=256):
    return np.random.default_rng(seed).integers(0, vocab, size=shape, dtype=np.int64)


def test_run_equals_the_weftc_executable(gpt, tmp_path):
    program = weft.compile(gpt)
    assert program.kind == "forward" and program.ranks == 1
    (name, shape), = program.inputs().items()
    ids = token_ids(shape)
    outputs = program.run({name: ids})
    # The executable weftc builds from the same model, on the same input.
    exe = tmp_path / "gpt"
    subprocess.run([str(weft.tool("weftc")), str(gpt), "-o", str(exe)], check=True)
    np.save(tmp_path / "ids.npy", ids)
    for index, output in enumerate(outputs):
        path = tmp_path / f"out{index}.npy"
        subprocess.run([str(exe), "--input", f"{name}=" + str(tmp_path / "ids.npy"),
                        "--output", f"{output}={path}"], check=True)
        expected = np.load(path)
        assert outputs[output].dtype == expected.dtype
        assert outputs[output].shape == expected.shape
        # The same code on the same data, one thread of BLAS each: equal.
        np.testing.assert_array_equal(outputs[output], expected)


def test_run_again_with_other_inputs(gpt):
    program = weft.compile(gpt)
    (name, shape), = program.inputs().items()
    first = program.run({name: token_ids(shape, 1)})
    second = program.run({name: token_ids(shape, 2)})
    again = program.run({name: token_ids(shape, 1)})
    logits = next(iter(first))
    assert not np.array_equal(first[logits], second[logits])
    np.testing.assert_array_equal(first[logits], again[logits])


def test_accepts_a_model_proto(gpt):
    onnx = pytest.importorskip("onnx")
    program = weft.compile(onnx.load(str(gpt)))
    (name, shape), = program.inputs().items()
    reference = weft.compile(gpt)
    ids = token_ids(shape)
    out, ref = program.run({name: ids}), reference.run({name: ids})
    for key in ref:
        np.testing.assert_array_equal(out[key], ref[key])


def test_output_files_and_messages(gpt, tmp_path):
    program = weft.compile(gpt, output=tmp_path / "model")
    assert program.executable == tmp_path / "model"
    assert program.weights == [tmp_path / "model.weights"]
    assert program.library == tmp_path / "model.so"
    assert all(path.exists() for path in [program.executable, program.library])


# Errors: each a Python exception with the compiler's one-line message.

def test_missing_model_file(tmp_path):
    with pytest.raises(weft.CompileError, match="model file '.*nothing.onnx' does not exist"):
        weft.compile(tmp_path / "nothing.onnx")


def test_malformed_onnx(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07 this is not a protobuf \xff\xff")
    with pytest.raises(weft.CompileError) as error:
        weft.compile(bad)
    message = str(error.value)
    assert "\n" not in message and "bad.onnx" in message


def test_bad_mesh(gpt):
    with pytest.raises(weft.CompileError, match="^--mesh: .*"):
        weft.compile(gpt, mesh="dp=two")


def test_indivisible_sharding(gpt):
    # 4 heads do not split 3 ways.
    with pytest.raises(weft.CompileError) as error:
        weft.compile(gpt, mesh={"tp": 3})
    message = str(error.value)
    assert "\n" not in message, message
    assert "parameter 'wte.weight' over mesh axis 'tp' (size 3): not divisible" in message


def test_unknown_option_value(gpt):
    with pytest.raises(weft.CompileError, match="--schedule must be gpipe, 1f1b, interleaved or zb-h1"):
        weft.compile(gpt, train=True, mesh={"pp": 2}, schedule="zigzag")


def test_not_a_model():
    with pytest.raises(weft.CompileError, match="not int"):
        weft.compile(42)


def test_run_checks_inputs(gpt):
    program = weft.compile(gpt)
    (name, shape), = program.inputs().items()
    with pytest.raises(weft.RunError, match=f"input '{name}' is missing"):
        program.run({})
    with pytest.raises(weft.RunError, match=f"input '{name}': expected int64 .* got float32"):
        program.run({name: np.zeros(shape, np.float32)})
    with pytest.raises(weft.RunError, match="the model has no input 'other'"):
        program.run({name: token_ids(shape), "other": np.zeros(1)})
    ids = token_ids(shape)
    ids[0, 3] = 300
    with pytest.raises(weft.RunError, match=rf"input '{name}' holds 300 at \[0, 3\], outside the 256 rows"):
        program.run({name: ids})


def test_run_refuses_a_partitioned_program(gpt):
    program = weft.compile(gpt, mesh={"tp": 2})
    with pytest.raises(weft.RunError, match="runs on 2 ranks .*Program.launch"):
        program.run({})


def test_freeze_and_train_only_choose_what_trains(gpt):
    def trained(**options):
        report = weft.compile(gpt, train=True, **options).report()
        return {b.name for b in report.programs[0].trained_parameters}

    everything = trained()
    assert "wte.weight" in everything and "h.0.ln_1.weight" in everything
    frozen = trained(freeze="h.*.ln_*")
    assert frozen == {n for n in everything if not n.startswith("h.") or ".ln_" not in n}
    assert trained(train_only=["wte.*", "wpe.*"]) == {"wte.weight", "wpe.weight"}
    with pytest.raises(weft.CompileError, match="--freeze 'nothing' names no trained parameter"):
        weft.compile(gpt, train=True, freeze="nothing")
    # A forward program trains nothing.
    assert not weft.compile(gpt).report().programs[0].trained_parameters
