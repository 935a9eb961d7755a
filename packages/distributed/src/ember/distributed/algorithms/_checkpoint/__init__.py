"""Activation checkpointing as a module wrapper (torch.distributed.algorithms._checkpoint)."""
