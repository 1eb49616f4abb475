"""The repetition study's experiment: a draw of modular-multiplication pairs, and the
decoder-only transformer trained for a fixed number of steps by one regime of reading them
(:mod:`genlab.train.repetition`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import torch

from genlab.data.dataset import Dataset
from genlab.data.modular import modular_samples
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.repetition.settings import STUDY, RepetitionConfig
from genlab.train.repetition import repeated_examples, train_on_stream

MODEL_KIND = "transformer"


def synthesize(config: RepetitionConfig) -> Dataset:
    return modular_samples(config.data)


def train_run(config: RepetitionConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    del checkpointing  # runs take a minute; a killed one starts over
    run = config.runs[run_name]
    regime = config.regimes[run.regime]
    recipe = config.recipe
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model(MODEL_KIND, config.model, input_dim, dataset.n_classes, run.seed,
                               device)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_on_stream(model, tensor(dataset.train.x), tensor(dataset.train.y),
                             tensor(dataset.test.x), tensor(dataset.test.y), regime, recipe,
                             torch_generator(run.seed, "batches", device=device.type))
    final = result.final
    metrics = {
        "status": result.status, "steps": result.steps, "diverged_step": result.diverged_step,
        "regime": run.regime, "seed": run.seed, "n_parameters": count_parameters(model),
        "data_budget": regime.data_budget, "repeated_set": regime.repeated_set,
        "repeated_prob": regime.repeated_prob,
        "repeated_examples": repeated_examples(regime, recipe),
        "repetitions": regime.repetitions(recipe),
        # the accuracy on (up to n_eval_seen of) the examples the run repeats: memorisation
        "final_seen_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_seen_loss": final.train_loss, "final_test_loss": final.test_loss,
    }
    history = [{"step": r.step, "seen_loss": r.train_loss, "seen_acc": r.train_acc,
                "test_loss": r.test_loss, "test_acc": r.test_acc} for r in result.history]
    return RunArtifacts(
        weights=state_tensors(model),
        model_spec=model_spec(MODEL_KIND, config.model, input_dim, dataset.n_classes),
        history=pa.Table.from_pylist(history),
        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
