"""Scripts that other interpreters run for comparison (PyTorch's side of the
benchmarks), in a folder of their own so that nothing here shadows the
modules they import. Not imported by tagflow."""
