"""Training: one model (loop.py); many models at once comes with the ensemble trainer."""
