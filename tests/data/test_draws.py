"""Each seed's own data draw (genlab.data.draws): what the synthesize stage writes, what a run
reads, and that adding a seed leaves the other seeds' files (and so their runs) as they were."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import yaml

from genlab.cli import main
from genlab.config import load_params
from genlab.data.draws import data_draws, draw_id, draw_settings, seeds
from genlab.settings import FrozenModel, GaussianMixtureSettings, Seed
from genlab.stages.common import DatasetDraws
from tests_support import ci_params_text


def _params(tmp_path: Path, runs: dict) -> Path:
    raw = yaml.safe_load(ci_params_text())
    study = raw["studies"]["random_labels"]
    study["data"].update(n_train=40, n_test=30, dim=4, n_classes=3)
    study["runs"] = runs
    raw["studies"] = {"random_labels": study}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _synthesize(params: Path, out: Path) -> None:
    assert main(["synthesize", "--params", str(params), "--study", "random_labels",
                 "--out", str(out)]) == 0


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


RUNS = {"p0-s0": {"label_noise": 0.0, "seed": 0}, "p1-s0": {"label_noise": 1.0, "seed": 0},
        "p0-s1": {"label_noise": 0.0, "seed": 1}}


def test_each_seed_draws_its_own_data_and_conditions_of_a_seed_share_it(tmp_path) -> None:
    params = _params(tmp_path, RUNS)
    _synthesize(params, tmp_path / "dataset")
    config = load_params(params).study("random_labels")
    assert sorted(p.name for p in (tmp_path / "dataset").iterdir()) == ["s0", "s1"]
    assert sorted(p.name for p in (tmp_path / "dataset" / "s0").iterdir()) == [
        "draws.json", "provenance.json", "test.parquet", "train.parquet"]
    draws = DatasetDraws(tmp_path / "dataset")
    a, b, c = (draws.for_run(config, run) for run in RUNS)
    # p = 0 and p = 1 of seed 0 are paired: the same points and the same corruption draws
    assert np.array_equal(a.train.x, b.train.x) and np.array_equal(a.train.u_corrupt,
                                                                     b.train.u_corrupt)
    # seed 1 is an independent unit: other points, other labels' corruption
    assert not np.allclose(a.train.x, c.train.x)
    assert not np.allclose(a.test.x, c.test.x)
    assert a.n_classes == 3 and len(a.train.x) == 40 and len(a.test.x) == 30
    # what the stage stored is what the generator makes of the draw's settings
    direct = draw_settings(config, draw_id(config, config.runs["p0-s1"]))
    from genlab.studies import load_study

    made = load_study("random_labels").synthesize(direct)
    assert np.array_equal(made.train.x, c.train.x) and np.array_equal(made.train.y, c.train.y)
    assert direct.data.seed != config.data.seed


def test_adding_a_seed_leaves_the_other_seeds_files_byte_identical(tmp_path) -> None:
    _synthesize(_params(tmp_path / "before", RUNS), tmp_path / "before" / "dataset")
    more = {**RUNS, "p0-s2": {"label_noise": 0.0, "seed": 2}}
    _synthesize(_params(tmp_path / "after", more), tmp_path / "after" / "dataset")
    before, after = (_digests(tmp_path / d / "dataset" / "s0") for d in ("before", "after"))
    assert before == after  # so the seed-0 runs, which depend on these files, stay cached
    assert (tmp_path / "after" / "dataset" / "s2" / "train.parquet").is_file()


def test_a_run_whose_seed_folder_lacks_its_draw_is_refused(tmp_path) -> None:
    from genlab.io import ArtifactError

    params = _params(tmp_path, RUNS)
    _synthesize(params, tmp_path / "dataset")
    config = load_params(params).study("random_labels")
    extra = config.model_copy(update={"runs": {
        **config.runs, "p0-s5": config.runs["p0-s0"].model_copy(update={"seed": 5})}})
    with pytest.raises(ArtifactError, match="s5/train.parquet: missing"):
        DatasetDraws(tmp_path / "dataset").for_run(extra, "p0-s5")


class _Run(FrozenModel):
    seed: Seed
    mean_scale: float


class _Study(FrozenModel):
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("mean_scale",)
    data: GaussianMixtureSettings
    runs: dict[str, _Run]


def test_a_data_condition_gets_its_own_draw_on_the_seeds_random_numbers() -> None:
    data = GaussianMixtureSettings(n_classes=3, dim=4, mean_scale=1.0, n_train=10, n_test=10,
                                   seed=7)
    config = _Study(data=data, runs={"a": _Run(seed=0, mean_scale=1.0),
                                     "b": _Run(seed=0, mean_scale=2.0),
                                     "c": _Run(seed=1, mean_scale=2.0)})
    draws = data_draws(config)
    assert list(draws) == ["s0-mean_scale=1.0", "s0-mean_scale=2.0", "s1-mean_scale=2.0"]
    assert draws["s0-mean_scale=1.0"]["seed"] == draws["s0-mean_scale=2.0"]["seed"]
    assert draws["s0-mean_scale=1.0"]["seed"] != draws["s1-mean_scale=2.0"]["seed"]
    assert seeds(config) == [0, 1]
    assert draw_settings(config, "s0-mean_scale=2.0").data.mean_scale == 2.0
    assert data_draws(config, seed=1) == {"s1-mean_scale=2.0": draws["s1-mean_scale=2.0"]}


def test_the_dvc_gate_stops_when_dvc_yaml_was_written_for_other_seeds(tmp_path, capsys) -> None:
    """dvc.yaml lists a folder per seed as the synthesize stage's outputs: a seed added to
    params.yaml without `genlab dag --write` must stop `dvc repro` at the gate, with the fix."""
    from genlab.workflow.generate import layout_digest

    written_for = layout_digest(load_params(_params(tmp_path / "old", RUNS)))
    more = _params(tmp_path / "new", {**RUNS, "p0-s2": {"label_noise": 0.0, "seed": 2}})
    assert main(["check-params", str(more), "--layout", written_for]) == 2
    assert "run `genlab dag --write`" in capsys.readouterr().err
    assert main(["check-params", str(more), "--layout", layout_digest(load_params(more))]) == 0


def test_draws_of_different_widths_share_a_seed_folder(tmp_path) -> None:
    """measures_grid's tasks draw a 5-dimensional teacher task and 40-point MNIST-1D series (for
    the MLPs and the CNNs) from one seed: the folder holds all, and each run reads back exactly
    its generator's."""
    raw = yaml.safe_load(ci_params_text())
    study = raw["studies"]["measures_grid"]
    study["data"]["teacher"].update(n_train=30, n_test=20, input_dim=5)
    for task in ("mnist1d", "mnist1d_cnn"):
        study["data"][task].update(num_samples=100, train_split=0.5)
    for axes in study["grid"].values():  # one run of each task
        axes.update(lr=axes["lr"][-1:], batch_size=[32], weight_decay=[0.0], seed=[0])
    assert set(study["grid"]) == {"teacher", "mnist1d", "mnist1d_cnn"}
    raw["studies"] = {"measures_grid": study}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    assert main(["synthesize", "--params", str(params), "--study", "measures_grid",
                 "--out", str(tmp_path / "dataset")]) == 0
    config = load_params(params).study("measures_grid")
    draws = DatasetDraws(tmp_path / "dataset")
    from genlab.studies import load_study

    spec = load_study("measures_grid")
    for name in config.runs:
        got = draws.for_run(config, name)
        made = spec.synthesize(draw_settings(config, draw_id(config, config.runs[name])))
        for split in ("train", "test"):
            a, b = getattr(got, split), getattr(made, split)
            assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y), (name, split)
            assert np.array_equal(a.u_corrupt, b.u_corrupt) if split == "train" else True
        assert got.train.x.shape[1] == (5 if config.runs[name].task == "teacher" else 40)
