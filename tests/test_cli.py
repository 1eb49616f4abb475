"""Every stage through the CLI, in-process, on a tiny params file: artifacts, determinism and
the report."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from genlab.cli import main
from tests_support import ci_params_text

ROOT = Path(__file__).resolve().parents[1]
EVIL = '<script>alert("x")</script><img src="http://example.invalid/x.png">'


def tiny_params(tmp_path: Path) -> Path:
    raw = yaml.safe_load(ci_params_text())
    study = raw["studies"]["random_labels"]
    study["description"] = EVIL
    study["data"].update(n_train=60, n_test=100, dim=8, n_classes=3, mean_scale=1.5)
    study["model"]["hidden"] = [32]
    study["train"].update(batch_size=20, max_steps=300)
    raw["studies"] = {"random_labels": study}  # the other studies have tests of their own
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def pipeline(params: Path, out: Path) -> None:
    runs = yaml.safe_load(params.read_text())["studies"]["random_labels"]["runs"]
    study = out / "data" / "random_labels"
    common = ["--params", str(params), "--study", "random_labels"]
    assert main(["synthesize", *common, "--out", str(study / "dataset")]) == 0
    for run in runs:
        assert main(["train", *common, "--run", run, "--dataset", str(study / "dataset"),
                     "--out", str(study / "runs" / run)]) == 0
    for analysis in ("sharpness", "intrinsic_dim"):
        assert main(["analyze", analysis, *common, "--dataset", str(study / "dataset"), "--runs",
                     str(study / "runs"), "--out", str(study / "analyses" / analysis)]) == 0
    assert main(["aggregate", *common, "--runs", str(study / "runs"), "--analyses",
                 str(study / "analyses"), "--out", str(study)]) == 0
    assert main(["report", "--params", str(params), "--studies", str(study),
                 "--out", str(out / "reports")]) == 0


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli")
    params = tiny_params(base)
    for name in ("a", "b"):
        pipeline(params, base / name)
    return base / "a", base / "b"


def test_every_artifact_is_written(two_runs) -> None:
    a, _ = two_runs
    files = set(digests(a))
    assert {"data/random_labels/dataset/s0/train.parquet",
            "data/random_labels/dataset/s0/draws.json",
            "data/random_labels/dataset/s0/provenance.json",
            "data/random_labels/runs/p0-s0/model.safetensors",
            "data/random_labels/runs/p0-s0/history.parquet",
            "data/random_labels/summary.json", "data/random_labels/summary.parquet",
            "data/random_labels/analyses/sharpness/p0-s0.json",
            "data/random_labels/analyses/sharpness/p0-s0_density.parquet",
            "data/random_labels/sharpness_density.parquet",
            "data/random_labels/plots/train_acc.csv", "data/random_labels/plots/test_acc.csv",
            "reports/index.html", "reports/claims.json"} <= files
    assert not [f for f in files if f.endswith(".tmp")]


def test_rerun_is_byte_identical_on_cpu(two_runs) -> None:
    a, b = two_runs
    assert digests(a) == digests(b)


def test_sidecars_record_provenance(two_runs) -> None:
    a, _ = two_runs
    model = json.loads((a / "data/random_labels/runs/p0_5-s0/model.json").read_text())
    prov = model["provenance"]
    assert prov["run"] == "p0_5-s0" and prov["seed"] == 0 and prov["device"] == "cpu"
    assert len(prov["settings_sha256"]) == 64 and prov["versions"]["torch"]
    assert model["kind"] == "mlp" and model["input_dim"] == 8 and model["output_dim"] == 3


def test_claims_json_lists_every_claim_with_a_status(two_runs) -> None:
    a, _ = two_runs
    claims = json.loads((a / "reports/claims.json").read_text())["claims"]
    assert len(claims) == 4
    for claim in claims:
        assert claim["study"] == "random_labels"
        statuses = {"literature": {"reproduced", "not_reproduced", "inconclusive", "not_run"},
                    "control": {"passed", "failed", "inconclusive", "not_run"}}
        assert claim["status"] in statuses[claim["kind"]]
        assert claim["numbers"] and "Zhang" in claim["citation"]


def test_report_is_self_contained_and_escapes_user_text(two_runs) -> None:
    a, _ = two_runs
    html = (a / "reports/index.html").read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;" in html  # the description is shown, as text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<svg" in html  # figures are inline
    assert "Provenance" in html


def test_train_refuses_an_undeclared_run(tmp_path: Path, capsys) -> None:
    params = tiny_params(tmp_path)
    code = main(["train", "--params", str(params), "--study", "random_labels", "--run", "p9-s9",
                 "--dataset", str(tmp_path), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "studies.random_labels.runs.p9-s9: no such run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_group_training_writes_what_training_each_run_alone_does(two_runs, tmp_path) -> None:
    """`genlab train` without --run trains the sweep at once (random_labels has a vectorised
    group trainer): every run's four files equal, byte for byte, the ones its own stage wrote."""
    reference, _ = two_runs
    params = tiny_params(tmp_path)
    study = reference / "data" / "random_labels"
    assert main(["train", "--params", str(params), "--study", "random_labels", "--dataset",
                 str(study / "dataset"), "--out", str(tmp_path / "runs")]) == 0
    assert digests(tmp_path / "runs") == digests(study / "runs")


def test_sharpness_stage_records_each_runs_curvature_beside_its_threshold(two_runs) -> None:
    """The stage's numbers are the library's on the saved model and the labels it was trained on
    (the corrupted ones), and the summary and report carry them."""
    import torch

    from genlab.analyses.curvature.hessian import hessian_top_eigenvalues
    from genlab.config import load_params
    from genlab.data.dataset import corrupt_labels
    from genlab.io import read_parquet
    from genlab.losses import loss_value
    from genlab.models.registry import load_model
    from genlab.seeding import subsample
    from genlab.stages.common import DatasetDraws

    a, _ = two_runs
    study = a / "data" / "random_labels"
    config = load_params(a.parent / "params.yaml").study("random_labels")
    settings = config.analyses.sharpness
    summary = json.loads((study / "summary.json").read_text())
    assert set(summary["analyses"]["sharpness"]) == set(config.runs)
    for run in config.runs:
        record = json.loads((study / "analyses/sharpness" / f"{run}.json").read_text())
        assert record == {**summary["analyses"]["sharpness"][run],
                          "provenance": record["provenance"]}
        assert record["status"] == "done" and record["provenance"]["run"] == run
        assert record["threshold"] == pytest.approx((2 + 2 * config.train.momentum)
                                                     / config.train.lr)
        folder = study / "runs" / run
        spec = json.loads((folder / "model.json").read_text())
        assert spec["weights_sha256"] == hashlib.sha256(
            (folder / "model.safetensors").read_bytes()).hexdigest()
        model = load_model(spec, folder / "model.safetensors")
        dataset = DatasetDraws(study / "dataset").for_run(config, run)  # its own draw
        labels, _ = corrupt_labels(dataset.train, config.runs[run].label_noise)
        X, y = subsample(torch.from_numpy(dataset.train.x), torch.from_numpy(labels),
                         settings.max_examples, settings.seed)
        top = hessian_top_eigenvalues(
            model, lambda out, t: loss_value("cross_entropy", out, t), X, y, k=settings.k,
            max_iter=settings.max_iter, tol=settings.tol, seed=settings.seed,
            dtype=getattr(torch, settings.dtype))
        assert record["top_eigenvalues"] == pytest.approx(list(top.eigenvalues), rel=1e-12)
    density = read_parquet(study / "sharpness_density.parquet").to_pydict()
    assert set(density["run"]) == set(config.runs)
    html = (a / "reports/index.html").read_text()
    assert "Curvature of the trained models" in html and "(2 + 2β)/η" in html


def test_intrinsic_dim_stage_measures_each_layer_trained_and_at_init(two_runs) -> None:
    """Layer 0 is the data's own ID; the untrained model the stage rebuilds from the run seed is
    the one training started from (its loss is the history's step-0 loss)."""
    import torch

    from genlab.analyses.dimension.estimators import TwoNN
    from genlab.config import load_params
    from genlab.data.dataset import corrupt_labels
    from genlab.io import read_parquet
    from genlab.models.registry import seeded_model_from_spec
    from genlab.stages.common import DatasetDraws
    from genlab.train.loop import evaluate

    a, _ = two_runs
    study = a / "data" / "random_labels"
    config = load_params(a.parent / "params.yaml").study("random_labels")
    layers = read_parquet(study / "intrinsic_dim_layers.parquet").to_pylist()
    for run in config.runs:
        dataset = DatasetDraws(study / "dataset").for_run(config, run)  # its own draw
        X = torch.from_numpy(dataset.train.x)
        assert config.analyses.intrinsic_dim.max_examples >= len(X)  # all of them: no subsample
        d_data = TwoNN(duplicates="drop").fit(X).dimension_
        record = json.loads((study / "analyses/intrinsic_dim" / f"{run}.json").read_text())
        assert record["status"] == "done" and record["d_data"] == pytest.approx(d_data, rel=1e-12)
        mine = [r for r in layers if r["run"] == run]
        assert [r["name"] for r in mine] == ["input", "hidden 1", "output"]
        assert [r["width"] for r in mine] == [8, 32, 3]
        assert [r["id_trained"] for r in mine] == record["layer_ids_trained"]
        assert record["label_sharpness"] > 0
        spec = json.loads((study / "runs" / run / "model.json").read_text())
        init = seeded_model_from_spec(spec, config.runs[run].seed)
        labels, _ = corrupt_labels(dataset.train, config.runs[run].label_noise)
        loss, _ = evaluate(init, X, torch.from_numpy(labels))
        step0 = read_parquet(study / "runs" / run / "history.parquet").to_pylist()[0]
        assert step0["step"] == 0 and loss == pytest.approx(step0["train_loss"], rel=1e-6)
    html = (a / "reports/index.html").read_text()
    assert "Intrinsic dimension of the representations" in html


def test_sharpness_stage_skips_a_diverged_run_with_its_reason(two_runs, tmp_path) -> None:
    import shutil

    reference, _ = two_runs
    study = tmp_path / "random_labels"
    shutil.copytree(reference / "data/random_labels/dataset", study / "dataset")
    shutil.copytree(reference / "data/random_labels/runs", study / "runs")
    metrics = study / "runs/p1-s0/metrics.json"
    metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "diverged",
                                   "diverged_step": 17}))
    params = reference.parent / "params.yaml"
    common = ["--params", str(params), "--study", "random_labels"]
    assert main(["analyze", "sharpness", *common, "--dataset", str(study / "dataset"),
                 "--runs", str(study / "runs"), "--out", str(study / "analyses/sharpness")]) == 0
    record = json.loads((study / "analyses/sharpness/p1-s0.json").read_text())
    assert record["status"] == "skipped" and "diverged at step 17" in record["reason"]
    assert not (study / "analyses/sharpness/p1-s0_density.parquet").exists()
    assert json.loads((study / "analyses/sharpness/p0-s0.json").read_text())["status"] == "done"


class Killed(BaseException):
    """Not an Exception: nothing in the stage may catch it, as nothing catches SIGKILL."""


def checkpointed_training(tmp_path: Path) -> tuple[list[str], Path]:
    """The tiny study with a checkpoint at every evaluation, synthesized: (the ``genlab train``
    arguments of run p0_5-s0, its output folder)."""
    raw = yaml.safe_load(tiny_params(tmp_path).read_text())
    raw["runtime"]["checkpoint_minutes"] = 0  # a checkpoint at every evaluation
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    study = tmp_path / "data" / "random_labels"
    common = ["--params", str(params), "--study", "random_labels"]
    assert main(["synthesize", *common, "--out", str(study / "dataset")]) == 0
    run_dir = study / "runs" / "p0_5-s0"
    return ["train", *common, "--run", "p0_5-s0", "--dataset", str(study / "dataset"),
            "--out", str(run_dir)], run_dir


def test_a_killed_training_job_resumes_to_identical_artifacts(two_runs, tmp_path, monkeypatch):
    import dataclasses

    from genlab.train.checkpoint_folder import CheckpointFolder

    reference, _ = two_runs
    train, run_dir = checkpointed_training(tmp_path)
    original = CheckpointFolder.checkpointing

    def dies_after_step_30(self, minutes, device):
        plan = original(self, minutes, device)

        def save(ckpt):
            plan.save(ckpt)
            if ckpt.step == 30:
                raise Killed

        return dataclasses.replace(plan, save=save)

    monkeypatch.setattr(CheckpointFolder, "checkpointing", dies_after_step_30)
    with pytest.raises(Killed):
        main(train)
    assert sorted(p.name for p in run_dir.iterdir()) == [".checkpoint"]  # no output yet
    monkeypatch.setattr(CheckpointFolder, "checkpointing", original)
    assert main(train) == 0
    assert not (run_dir / ".checkpoint").exists()
    theirs = digests(reference / "data/random_labels/runs/p0_5-s0")
    assert digests(run_dir) == theirs


def test_a_kill_between_a_checkpoints_two_writes_keeps_the_one_before(two_runs, tmp_path,
                                                                       monkeypatch, caplog):
    """Killed after a checkpoint's tensors are written and before the JSON naming them: the
    JSON still names the previous checkpoint's (complete) tensors, and the rerun resumes from
    it to identical artifacts. (Overwriting one tensors file in place lost the checkpoint here:
    the real-process kill test met it by chance.)"""
    import genlab.train.checkpoint_folder as checkpoint_folder  # it writes the checkpoints

    reference, _ = two_runs
    train, run_dir = checkpointed_training(tmp_path)
    write_json = checkpoint_folder.write_json

    def dies_before_naming_step_30(path, data):
        if Path(path).name == "state.json" and data["step"] == 30:
            raise Killed
        write_json(path, data)

    monkeypatch.setattr(checkpoint_folder, "write_json", dies_before_naming_step_30)
    with pytest.raises(Killed):
        main(train)
    folder = run_dir / ".checkpoint"
    named = json.loads((folder / "state.json").read_text())
    assert 0 < named["step"] < 30
    assert len(list(folder.glob("state-*.safetensors"))) == 2  # the named one and step 30's
    monkeypatch.setattr(checkpoint_folder, "write_json", write_json)
    with caplog.at_level(logging.INFO, logger="genlab"):
        assert main(train) == 0
    assert f"resuming from the checkpoint at step {named['step']}" in caplog.text
    assert not folder.exists()
    assert digests(run_dir) == digests(reference / "data/random_labels/runs/p0_5-s0")


def test_a_checkpoint_from_other_settings_is_not_used(tmp_path, caplog) -> None:
    import json as json_

    raw = yaml.safe_load(tiny_params(tmp_path).read_text())
    raw["runtime"]["checkpoint_minutes"] = 0
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    study = tmp_path / "data" / "random_labels"
    common = ["--params", str(params), "--study", "random_labels"]
    assert main(["synthesize", *common, "--out", str(study / "dataset")]) == 0
    stale = study / "runs" / "p0-s0" / ".checkpoint"
    stale.mkdir(parents=True)
    (stale / "state-5-00000000.safetensors").write_bytes(b"not a checkpoint")
    (stale / "state.json").write_text(json_.dumps({"settings_sha256": "other", "step": 5}))
    assert main(["train", *common, "--run", "p0-s0", "--dataset", str(study / "dataset"),
                 "--out", str(study / "runs" / "p0-s0")]) == 0
    assert "ignoring checkpoint" in caplog.text


def test_a_study_switches_sharpness_on_for_its_trained_models(tmp_path: Path) -> None:
    """intrinsic_dim with sharpness set in its analyses block (nothing else changes): through
    every stage, the layers run (a trained MLP) is analysed on its training loss, and the runs
    without one model to load (an estimator run, a subspace run) are skipped with the reason;
    the aggregate and the report take both."""
    adam = {"optimizer": "adam", "lr": 0.01, "batch_size": 50, "eval_every": 50}
    raw = yaml.safe_load(ci_params_text())
    raw["studies"] = {"intrinsic_dim": {
        "data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                 "intrinsic_dim": 3, "ambient_dim": 16, "embedding": "tanh", "n_train": 200,
                 "n_test": 150, "seed": 0},
        "estimators": {"dims": [2, 5], "ambient_dim": 20, "n_points": 300, "mle_k": 10},
        "layers": {"model": {"hidden": [32, 16]}, "train": {**adam, "max_steps": 100}},
        "subspace": {"data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                              "input_dim": 4, "n_train": 200, "n_test": 200, "seed": 0},
                     "depth": 1, "dims": [2, 8],
                     "full_train": {**adam, "max_steps": 100, "stop_at_train_acc": None},
                     "train": {**adam, "max_steps": 50, "stop_at_train_acc": None}},
        "scaling": {"ambient_dim": 8, "teacher_hidden": [8], "sizes": [50, 100],
                    "n_test": 200, "model": {"hidden": [16]},
                    "train": {**adam, "max_steps": 100}},
        "label_sharpness": {"num_samples": 100},
        "analyses": {"sharpness": {"max_iter": 10, "trace_num_matvecs": 6,
                                   "density_num_repeats": 1, "density_num_steps": 5}},
        "claims": {"twonn": "<= 0", "mle": "<= 0", "layers": "> 0", "hunchback": "> 0",
                   "subspace": "<= 2.5", "scaling": "> 0"},
        "runs": {"estimate-linear-s0": {"kind": "estimate", "embedding": "linear", "seed": 0},
                 "layers-random-s0": {"kind": "layers", "labels": "random", "seed": 0},
                 "subspace-w4-s0": {"kind": "subspace", "width": 4, "seed": 0}}}}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    study = tmp_path / "data" / "intrinsic_dim"
    common = ["--params", str(params), "--study", "intrinsic_dim"]
    assert main(["synthesize", *common, "--out", str(study / "dataset")]) == 0
    for run in raw["studies"]["intrinsic_dim"]["runs"]:
        assert main(["train", *common, "--run", run, "--dataset", str(study / "dataset"),
                     "--out", str(study / "runs" / run)]) == 0
    out = study / "analyses" / "sharpness"
    assert main(["analyze", "sharpness", *common, "--dataset", str(study / "dataset"),
                 "--runs", str(study / "runs"), "--out", str(out)]) == 0
    done = json.loads((out / "layers-random-s0.json").read_text())
    assert done["status"] == "done" and done["lambda_max"] > 0
    assert (done["lr"], done["batch_size"]) == (0.01, 50)
    assert done["provenance"]["run"] == "layers-random-s0"
    assert (out / "layers-random-s0_density.parquet").exists()
    estimate = json.loads((out / "estimate-linear-s0.json").read_text())
    assert estimate["status"] == "skipped" and "no model is trained" in estimate["reason"]
    subspace = json.loads((out / "subspace-w4-s0.json").read_text())
    assert subspace["status"] == "skipped" and "mlp_subspace" in subspace["reason"]
    assert not (out / "estimate-linear-s0_density.parquet").exists()
    assert main(["aggregate", *common, "--runs", str(study / "runs"), "--analyses",
                 str(study / "analyses"), "--out", str(study)]) == 0
    summary = json.loads((study / "summary.json").read_text())
    assert summary["analyses"]["sharpness"]["subspace-w4-s0"]["status"] == "skipped"
    assert main(["report", "--params", str(params), "--studies", str(study),
                 "--out", str(tmp_path / "reports")]) == 0
    html = (tmp_path / "reports/index.html").read_text()
    assert "Curvature of the trained models" in html and "skipped: estimator run" in html


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path: Path, monkeypatch, capsys) -> None:
    """Interrupted in its command or before it started (a stage still importing): one line,
    no traceback, and no stamp, so both engines run the stage again."""
    import genlab.stages.check_params as check_params

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(check_params, "run", interrupted)
    params = tmp_path / "params.yaml"
    params.write_text(ci_params_text())
    assert main(["check-params", str(params)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == ("genlab check-params: interrupted (its outputs are not stamped, so "
                           "both engines will run it again)")

    def stage_interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("genlab.stages.stage_run.StageRun.__init__", stage_interrupted)
    assert main(["--stage", "check_params", "check-params", str(params)]) == 130
    assert "interrupted" in capsys.readouterr().err
