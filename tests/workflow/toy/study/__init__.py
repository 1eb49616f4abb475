"""A toy study: an MLP on a Gaussian mixture, to test that adding a study needs only its package,
its params block and its tests."""
