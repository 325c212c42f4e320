"""Shared test configuration."""

# run by torchrun from test_distributed.py, not a test module itself
collect_ignore = ["ddp_worker.py"]
