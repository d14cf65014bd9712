"""Predictable Latency Mode: the PLM coordinator's allocation, run over known demands."""
