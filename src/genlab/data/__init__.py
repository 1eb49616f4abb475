"""Seeded dataset generators: pure functions returning arrays, one module per family."""

from genlab.data.dataset import Dataset, corrupt_labels, dataset_from_tables, dataset_to_tables

__all__ = ["Dataset", "corrupt_labels", "dataset_from_tables", "dataset_to_tables"]
