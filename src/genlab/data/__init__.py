"""Seeded dataset generators: pure functions returning arrays, one module per family, their
settings in :mod:`genlab.data.settings`. Imports nothing, so that importing the settings does not
import the generators (or numpy)."""
