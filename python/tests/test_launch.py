"""Program.launch: the ranks of a partitioned program over weft-run."""

import numpy as np
import pytest

import weft


def test_tp2_launch_matches_one_rank(gpt):
    one = weft.compile(gpt)
    two = weft.compile(gpt, mesh={"tp": 2})
    assert two.ranks == 2 and two.mesh == {"tp": 2}
    (name, shape), = one.inputs().items()
    ids = np.random.default_rng(3).integers(0, 256, size=shape, dtype=np.int64)
    expected = one.run({name: ids})
    got = two.launch({name: ids}).outputs
    assert set(got) == set(expected)
    for key in expected:
        # The all-reduce sums the partial products in another order.
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, atol=1e-5)


def test_cp2_launch_matches_one_rank_in_every_attention_form(gpt):
    one = weft.compile(gpt)
    (name, shape), = one.inputs().items()
    ids = np.random.default_rng(4).integers(0, 256, size=shape, dtype=np.int64)
    expected = one.run({name: ids})
    for form in ("ring", "ring-contiguous", "all-to-all"):
        got = weft.compile(gpt, mesh={"cp": 2}, cp_attention=form).launch(
            {name: ids}).outputs
        for key in expected:
            # The online softmax sums the blocks in another order.
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, atol=1e-5,
                                       err_msg=form)
    with pytest.raises(weft.CompileError, match="unknown context attention 'spiral'"):
        weft.compile(gpt, mesh={"cp": 2}, cp_attention="spiral")


def test_training_launch_matches_one_rank(gpt_batch8, tokens):
    options = dict(data=tokens, steps=8, lr=3e-3, warmup=2, init_seed=1)
    one = weft.compile(gpt_batch8, train=True).launch(**options).metrics
    two = weft.compile(gpt_batch8, train=True, mesh={"dp": 2}).launch(**options).metrics
    assert [m["step"] for m in two] == list(range(1, 9))
    for a, b in zip(one, two):
        for key in ("loss", "grad_norm", "lr"):
            # dp=2 sums the gradients in another order (measured: 1e-6).
            assert b[key] == pytest.approx(a[key], rel=1e-5), (a["step"], key)
    # The parameters train: from ln(256) = 5.55 the loss falls.
    assert one[0]["loss"] == pytest.approx(5.55, abs=0.05)
    assert one[-1]["loss"] < one[0]["loss"] - 0.3


def test_launch_error_names_the_input(gpt):
    program = weft.compile(gpt, mesh={"tp": 2})
    (name, shape), = program.inputs().items()
    with pytest.raises(weft.LaunchError, match=f"input '{name}'"):
        program.launch({name: np.zeros(shape, np.float32)})
