"""A training checkpoint as tensors (safetensors) plus plain metadata (JSON): no pickle.

:func:`to_records` and :func:`from_records` are exact inverses; the CLI writes the two records
atomically beside a run's outputs and deletes them once the run has finished.
"""

from __future__ import annotations

from typing import Any

import torch

from genlab.train.loop import Checkpoint, EvalRow

_ROW_FIELDS = ("step", "train_loss", "train_acc", "test_loss", "test_acc")


def to_records(ckpt: Checkpoint) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in ckpt.model.items()}
    tensors["generator"] = ckpt.generator.cpu()
    if ckpt.order is not None:
        tensors["order"] = ckpt.order.cpu()
    state_meta: dict[str, dict[str, Any]] = {}
    for index, state in ckpt.optimizer["state"].items():
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                state_meta.setdefault(str(index), {})[name] = value
    meta = {
        "step": ckpt.step, "position": ckpt.position,
        "optimizer_state": state_meta,
        "optimizer_indices": [str(i) for i in ckpt.optimizer["state"]],
        "param_groups": ckpt.optimizer["param_groups"],
        "history": [row.as_dict() for row in ckpt.history],
    }
    return tensors, meta


def from_records(tensors: dict[str, torch.Tensor], meta: dict[str, Any],
                 device: torch.device | str = "cpu") -> Checkpoint:
    state: dict[int, dict[str, Any]] = {int(i): {} for i in meta["optimizer_indices"]}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            # optimizer state lives with its parameter, except Adam's scalar step counter
            state[int(index)][name] = value if name == "step" else value.to(device)
    for index, values in meta["optimizer_state"].items():
        state[int(index)].update(values)
    history = tuple(
        EvalRow(*(row[f] for f in _ROW_FIELDS),
                probes={k: v for k, v in row.items() if k not in _ROW_FIELDS})
        for row in meta["history"])
    return Checkpoint(
        step=int(meta["step"]),
        model={k.removeprefix("model."): v.to(device) for k, v in tensors.items()
               if k.startswith("model.")},
        optimizer={"state": state, "param_groups": meta["param_groups"]},
        generator=tensors["generator"],
        order=tensors["order"].to(device) if "order" in tensors else None,
        position=int(meta["position"]),
        history=history,
    )
