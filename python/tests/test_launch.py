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


def test_training_launch_logs_metrics(gpt_batch8, tokens):
    program = weft.compile(gpt_batch8, train=True, mesh={"dp": 2})
    result = program.launch(data=tokens, steps=3, lr=1e-3, init_seed=1)
    assert [m["step"] for m in result.metrics] == [1, 2, 3]
    assert all(np.isfinite(m["loss"]) for m in result.metrics)


def test_launch_error_names_the_input(gpt):
    program = weft.compile(gpt, mesh={"tp": 2})
    (name, shape), = program.inputs().items()
    with pytest.raises(weft.LaunchError, match=f"input '{name}'"):
        program.launch({name: np.zeros(shape, np.float32)})
