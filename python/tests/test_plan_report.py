"""weft.plan and Program.report as data."""

import pytest

import weft


def test_plan_ranks_fitting_plans(gpt_batch8, cluster4):
    plans = weft.plan(gpt_batch8, cluster=cluster4, global_batch=8)
    assert plans, "no plan"
    times = [p.step_time for p in plans]
    assert times == sorted(times)
    best = plans[0]
    for plan in plans:
        # Every plan uses the cluster's 4 ranks, its figures agree with
        # one another, and it fits.
        assert plan.dp * plan.tp * plan.pp * plan.cp == 4, plan.spec
        assert plan.microbatch_size * plan.microbatches * plan.dp == 8, plan.spec
        assert plan.tokens_per_second == pytest.approx(8 * 16 / plan.step_time, rel=1e-3)
        memory = plan.memory
        assert memory.total == pytest.approx(
            memory.weights + memory.gradients + memory.optimizer + memory.activations,
            rel=1e-6)
        assert 0 < memory.total <= memory.capacity
        assert sum(plan.time.values()) >= plan.step_time * 0.999 > 0
        assert 0 < plan.mfu < 1
    assert best.rank == 0 and [p.rank for p in plans] == list(range(len(plans)))
    assert best.recompute != "selective"  # weft.compile could not build it
    text = best.explain()
    assert best.spec in text and "why not the others" in text
    assert "x the step time of the fastest plan" in plans[-1].explain()


def test_plan_fix_pins_choices(gpt_batch8, cluster8):
    plans = weft.plan(gpt_batch8, cluster=cluster8, global_batch=8,
                      fix={"dp": 2, "tp": 4})
    assert plans and all((p.dp, p.tp, p.pp) == (2, 4, 1) for p in plans)


def test_plan_synthetic_model():
    plans = weft.plan("gpt:layers=24,hidden=2048,heads=16,vocab=51200,seq=2048",
                      cluster="dgx-a100-80g", nodes=2, global_batch=256)
    assert plans[0].dp * plans[0].tp * plans[0].pp == 16
    assert "inside a node" in plans[0].placement or "across nodes" in plans[0].placement


def test_plan_errors(tmp_path, monkeypatch):
    with pytest.raises(weft.PlanError, match="'nowhere' is neither a preset"):
        weft.plan("gpt:layers=2,hidden=64,heads=4,vocab=256,seq=32", cluster="nowhere")
    monkeypatch.setenv("WEFT_CPU_LOCAL", str(tmp_path / "unmeasured.json"))
    with pytest.raises(weft.PlanError, match="the cpu-local cluster is measured"):
        weft.plan("gpt:layers=2,hidden=64,heads=4,vocab=256,seq=32", cluster="cpu-local")
    with pytest.raises(weft.PlanError, match="no plan fits in memory"):
        weft.plan("gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048",
                  cluster="dgx-a100-80g", nodes=1, global_batch=8, fix={"tp": 1, "pp": 1})
    with pytest.raises(weft.PlanError, match="fix: "):
        weft.plan("gpt:layers=2,hidden=64,heads=4,vocab=256,seq=32", cluster="dgx-h100",
                  fix="dp=banana")


def test_compile_the_chosen_plan(gpt_batch8, cluster4):
    best = weft.plan(gpt_batch8, cluster=cluster4, global_batch=8,
                     fix={"dp": 2, "tp": 1, "pp": 2})[0]
    program = weft.compile(gpt_batch8, train=True, plan=best)
    assert program.plan == best.spec
    assert program.ranks == 4 and program.mesh == {"pp": 2, "dp": 2}
    report = program.report()
    assert report.top_plans[0]["plan"] == best.spec
    assert report.pipeline is not None and len(report.pipeline.timeline) == 2


def test_report_of_tensor_parallel(gpt):
    report = weft.compile(gpt, mesh={"tp": 2}).report()
    assert report.ranks == 2
    (program,) = report.programs
    split = [p for p in program.parameters if p.local_shape != p.shape]
    assert split, "tp=2 split no parameter"
    for p in split:
        assert "tp" in p.sharding
    assert sum(p.local_bytes for p in program.parameters) == program.parameter_bytes
    assert program.parameter_bytes < program.whole_model_parameter_bytes
    kinds = {c.kind for c in program.collectives}
    assert "all_reduce" in kinds
    assert all(c.bytes_moved_per_rank > 0 and c.runs >= 1 for c in program.collectives)


def test_report_of_one_rank(gpt):
    report = weft.compile(gpt).report()
    (program,) = report.programs
    assert report.ranks == 1 and not program.collectives and report.pipeline is None
    assert all(p.local_shape == p.shape for p in program.parameters)
    html = report.to_html()
    assert html.startswith("<!DOCTYPE html>") and "No collectives" in html


def test_trace_summary_errors(tmp_path):
    with pytest.raises(weft.WeftError, match="cannot read trace"):
        weft.summarize_trace(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(weft.WeftError, match="is not JSON"):
        weft.summarize_trace(tmp_path / "bad.json")


def test_insert_shard_places_and_checks():
    import numpy as np
    from weft.checkpoints import insert_shard
    whole = np.zeros((4, 6), np.float32)
    # Dim 1 split over tp (mesh axis 1) of dp=2,tp=3: shard 2 is columns 4-5.
    insert_shard(whole, np.ones((4, 2), np.float32), "-,1", "dp=2,tp=3", 2)
    assert whole[:, 4:].sum() == 8 and whole[:, :4].sum() == 0
    with pytest.raises(weft.WeftError, match="makes shards of \\[4, 2\\]"):
        insert_shard(whole, np.ones((4, 3), np.float32), "-,1", "dp=2,tp=3", 0)
    with pytest.raises(weft.WeftError, match="malformed sharding"):
        insert_shard(whole, np.ones((4, 2), np.float32), "-,zz", "dp=2,tp=3", 0)
    with pytest.raises(weft.WeftError, match="shard 3 of 3"):
        insert_shard(whole, np.ones((4, 2), np.float32), "-,1", "dp=2,tp=3", 3)
