"""Analyses of trained models: pure functions from a model and data to frozen results."""
