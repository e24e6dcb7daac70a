"""Replay a Solution on real PyTorch jobs (docs/executor.md)."""
