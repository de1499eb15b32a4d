"""Noting what an agent reads, so the guards can refuse a write made from a stale read."""
